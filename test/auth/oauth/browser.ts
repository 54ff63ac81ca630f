/**
 * The browser of the OAuth tests, over real HTTP. SITE_URL (`http://localhost:3000` here)
 * is the application's origin that fronts the service (interface §1): its
 * `/auth/v1/callback` is the service's. Every step is separate so that the failure tests
 * can tamper with any of them; `signInWith` runs the whole flow.
 */
import type { CallResult, TestApp } from '../../helpers/app.ts';

export const SITE_URL = 'http://localhost:3000';
export const REDIRECT_URI = `${SITE_URL}/auth/v1/callback`;
export const STATE_COOKIE = 'plinth-oauth-state';

export interface Started {
  /** The authorize response. */
  res: CallResult;
  /** Where the service sends the browser. */
  location: URL;
  /** The state cookie as the browser sends it back (`name=value`), or null if none was set. */
  cookie: string | null;
  /** The Set-Cookie header of the state cookie. */
  setCookie: string | null;
  state: string | null;
}

/** GET /auth/v1/authorize?provider=… */
export async function startSignIn(app: TestApp, provider: string, extraQuery = ''): Promise<Started> {
  const res = await app.call('GET', `/auth/v1/authorize?provider=${encodeURIComponent(provider)}${extraQuery}`);
  const setCookie = res.headers.getSetCookie().find((c) => c.startsWith(`${STATE_COOKIE}=`)) ?? null;
  const location = new URL(res.headers.get('location') ?? 'about:blank');
  return { res, location, cookie: setCookie === null ? null : setCookie.split(';')[0], setCookie, state: location.searchParams.get('state') };
}

/** How the provider sends the browser back to the callback. */
export interface ProviderReturn {
  method: 'GET' | 'POST';
  params: URLSearchParams;
}

/**
 * Follow the provider's pages from the authorize URL (redirects, with the provider's own
 * cookies) until it sends the browser to `<SITE_URL>/auth/v1/callback`, by a redirect or by
 * an auto-submitted form (apple's form_post).
 */
export async function visitProvider(start: URL): Promise<ProviderReturn> {
  const jar = new Map<string, Map<string, string>>();
  let url = start;
  for (let hop = 0; hop < 20; hop++) {
    const cookies = jar.get(url.origin);
    const res = await fetch(url, {
      redirect: 'manual',
      headers: cookies ? { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') } : {},
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair.indexOf('=');
      const m = jar.get(url.origin) ?? new Map<string, string>();
      m.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
      jar.set(url.origin, m);
    }
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location !== null) {
      await res.body?.cancel();
      const next = new URL(location, url);
      if (next.origin + next.pathname === REDIRECT_URI) return { method: 'GET', params: next.searchParams };
      url = next;
      continue;
    }
    const text = await res.text();
    const form = /<form method="post" action="([^"]+)">(.*?)<\/form>/s.exec(text);
    if (res.status === 200 && form && unescapeHtml(form[1]) === REDIRECT_URI) {
      const params = new URLSearchParams();
      for (const m of form[2].matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) params.append(unescapeHtml(m[1]), unescapeHtml(m[2]));
      return { method: 'POST', params };
    }
    throw new Error(`the provider did not send the browser back: ${res.status} ${url.href} ${text.slice(0, 300)}`);
  }
  throw new Error('too many redirects at the provider');
}

function unescapeHtml(s: string): string {
  return s.replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

/** Arrive at the callback (through SITE_URL, i.e. at the service) with the state cookie. */
export async function callback(app: TestApp, ret: ProviderReturn, cookie: string | null): Promise<CallResult> {
  const headers: Record<string, string> = cookie === null ? {} : { cookie };
  if (ret.method === 'GET') return app.call('GET', `/auth/v1/callback?${ret.params.toString()}`, { headers });
  return app.call('POST', '/auth/v1/callback', {
    raw: ret.params.toString(),
    headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
  });
}

/** The final redirect: where to, and its fragment. */
export interface Landing {
  status: number;
  location: string;
  /** The Location up to the fragment. */
  target: string;
  fragment: URLSearchParams;
}

export function landing(res: CallResult): Landing {
  const location = res.headers.get('location') ?? '';
  const hash = location.indexOf('#');
  return {
    status: res.status,
    location,
    target: hash < 0 ? location : location.slice(0, hash),
    fragment: new URLSearchParams(hash < 0 ? '' : location.slice(hash + 1)),
  };
}

export interface Flow {
  started: Started;
  returned: ProviderReturn;
  res: CallResult;
  landing: Landing;
}

/** The whole flow: authorize → the provider → the callback → SITE_URL with a fragment. */
export async function signInWith(app: TestApp, provider: string): Promise<Flow> {
  const started = await startSignIn(app, provider);
  if (started.res.status !== 302) throw new Error(`authorize answered ${started.res.status} ${started.res.text}`);
  const returned = await visitProvider(started.location);
  const res = await callback(app, returned, started.cookie);
  return { started, returned, res, landing: landing(res) };
}
