/**
 * SUPABASE_COMPAT: supabase-js's signInWithOAuth with `flowType: 'pkce'`, unchanged, against
 * a real OpenID provider (`oidc-provider`, discovered as `oidc`): the authorize URL carries
 * the code challenge and `redirect_to`; the callback redirects to `redirect_to?code=…`;
 * exchangeCodeForSession answers the session. A code works once, with its own verifier
 * only; provider errors land on the redirect in the query. The implicit flow honours
 * `redirect_to` under the setting; without the setting nothing changes (`redirect_to` and
 * `code_challenge` ignored, the session in SITE_URL's fragment).
 */
import t, { type Test } from 'tap';
import { createClient, type AuthChangeEvent, type Provider, type SupabaseClient } from '@supabase/supabase-js';
import { startApp, type TestApp } from '../helpers/app.ts';
import { uniqueEmail } from './helpers.ts';
import { REDIRECT_URI, SITE_URL, STATE_COOKIE, callback, visitProvider } from './oauth/browser.ts';
import { startOidcProvider, type OidcFake } from './oauth/fakes.ts';

const CLIENT = { clientId: 'oidc-client', clientSecret: 'oidc-secret-oidc', redirectUri: REDIRECT_URI };
const APP_CALLBACK = 'http://localhost:5173/auth/callback';
const OIDC = 'oidc' as Provider;

async function service(t: Test, oidc: OidcFake, compat: boolean): Promise<TestApp> {
  return startApp(t, {
    worker: false,
    env: {
      SITE_URL,
      AUTH_RATE_LIMIT: '0',
      ...(compat ? { SUPABASE_COMPAT: 'true', ADDITIONAL_REDIRECT_URLS: 'http://localhost:5173/**' } : {}),
      OIDC_CLIENT_ID: CLIENT.clientId,
      OIDC_CLIENT_SECRET: CLIENT.clientSecret,
      OIDC_ISSUER_URL: oidc.issuer,
    },
  });
}

/** A PKCE client with its own storage (where auth-js keeps the code verifier), and the events it fires. */
function pkceClient(app: TestApp): { sb: SupabaseClient; store: Map<string, string>; events: AuthChangeEvent[] } {
  const store = new Map<string, string>();
  const sb = createClient(app.url, app.anonKey, {
    auth: {
      flowType: 'pkce',
      persistSession: true,
      autoRefreshToken: false,
      detectSessionInUrl: false,
      storageKey: `sb-oauth-pkce-${Math.random()}`,
      storage: { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => void store.set(k, v), removeItem: (k) => void store.delete(k) },
    },
  });
  const events: AuthChangeEvent[] = [];
  sb.auth.onAuthStateChange((e) => void events.push(e));
  return { sb, store, events };
}

/** A browser on the URL signInWithOAuth returns: authorize → the provider's login → the callback; the callback's Location. */
async function browse(app: TestApp, authorizeUrl: string): Promise<{ authorize: number; location: URL }> {
  const u = new URL(authorizeUrl);
  const started = await app.call('GET', u.pathname + u.search);
  if (started.status !== 302) return { authorize: started.status, location: new URL('about:blank') };
  const cookie = started.headers.getSetCookie().find((c) => c.startsWith(`${STATE_COOKIE}=`))?.split(';')[0] ?? null;
  const returned = await visitProvider(new URL(started.headers.get('location')!));
  const res = await callback(app, returned, cookie);
  if (res.status !== 302) throw new Error(`the callback answered ${res.status} ${res.text}`);
  return { authorize: 302, location: new URL(res.headers.get('location')!) };
}

async function signInUrl(sb: SupabaseClient, redirectTo?: string): Promise<string> {
  const r = await sb.auth.signInWithOAuth({ provider: OIDC, options: { redirectTo, skipBrowserRedirect: true } });
  if (r.error !== null || !r.data.url) throw new Error(`signInWithOAuth: ${String(r.error)}`);
  return r.data.url;
}

t.test('supabase-js signInWithOAuth (PKCE) against SUPABASE_COMPAT=true', async (t) => {
  const oidc = await startOidcProvider(t, { ...CLIENT, conformIdTokenClaims: true });
  const app = await service(t, oidc, true);

  t.test('the code on redirect_to, exchangeCodeForSession, once', async (t) => {
    const { sb, store, events } = pkceClient(app);
    const email = uniqueEmail('oauth-pkce');
    oidc.next = { account: { email, email_verified: true } };
    const url = await signInUrl(sb, APP_CALLBACK);
    const q = new URL(url).searchParams;
    t.equal(q.get('code_challenge_method'), 's256', 'supabase-js sends a challenge');
    const { location } = await browse(app, url);
    t.equal(location.origin + location.pathname, APP_CALLBACK, 'to redirect_to');
    t.equal(location.hash, '', 'no session in the fragment');
    const code = location.searchParams.get('code');
    t.ok(code, 'an auth code in the query');
    const verifier = [...store.entries()].find(([k]) => k.endsWith('-code-verifier'))?.[1];
    t.ok(verifier, 'auth-js kept a verifier');

    const ex = await sb.auth.exchangeCodeForSession(code!);
    t.equal(ex.error, null, 'exchangeCodeForSession');
    t.equal(ex.data.user?.email, email);
    t.equal(ex.data.user?.app_metadata.provider, 'oidc', 'signed in with the provider');
    t.same(ex.data.user?.app_metadata.providers, ['oidc']);
    t.ok(events.includes('SIGNED_IN'), 'SIGNED_IN');
    t.equal((await sb.auth.getUser()).data.user?.email, email, 'signed in');

    // The same code again, with its own verifier: the flow is spent.
    const again = await fetch(`${app.url}/auth/v1/token?grant_type=pkce`, {
      method: 'POST',
      headers: { apikey: app.anonKey, 'content-type': 'application/json' },
      body: JSON.stringify({ auth_code: code, code_verifier: JSON.parse(verifier!) as string }),
    });
    t.equal(again.status, 404, 'a code is used once');
    t.match(await again.json(), { error_code: 'flow_state_not_found' });
  });

  t.test('no redirectTo: SITE_URL?code=; the same account signs in again', async (t) => {
    const { sb } = pkceClient(app);
    const email = uniqueEmail('oauth-pkce-site');
    oidc.next = { account: { email, email_verified: true } };
    const first = await browse(app, await signInUrl(sb));
    t.equal(first.location.origin, SITE_URL, 'SITE_URL');
    const a = await sb.auth.exchangeCodeForSession(first.location.searchParams.get('code')!);
    t.equal(a.error, null);
    const { sb: sb2 } = pkceClient(app);
    oidc.next = { account: { email, email_verified: true } };
    const second = await browse(app, await signInUrl(sb2));
    const b = await sb2.auth.exchangeCodeForSession(second.location.searchParams.get('code')!);
    t.equal(b.error, null);
    t.equal(b.data.user?.id, a.data.user?.id, 'one account');
  });

  t.test('a code with another verifier is refused, and spent', async (t) => {
    const { sb } = pkceClient(app);
    oidc.next = { account: { email: uniqueEmail('oauth-pkce-thief'), email_verified: true } };
    const { location } = await browse(app, await signInUrl(sb, APP_CALLBACK));
    const code = location.searchParams.get('code')!;
    const thief = pkceClient(app);
    await signInUrl(thief.sb, APP_CALLBACK); // the thief's own verifier
    const stolen = await thief.sb.auth.exchangeCodeForSession(code);
    t.equal(stolen.error?.code, 'bad_code_verifier', 'another verifier does not answer the challenge');
    t.equal(stolen.error?.status, 400);
    const late = await sb.auth.exchangeCodeForSession(code);
    t.equal(late.error?.code, 'flow_state_not_found', 'a code is tried once');
  });

  t.test('errors land on redirect_to, in the query', async (t) => {
    const { sb } = pkceClient(app);
    oidc.next = { deny: true };
    const denied = await browse(app, await signInUrl(sb, APP_CALLBACK));
    t.equal(denied.location.origin + denied.location.pathname, APP_CALLBACK);
    t.equal(denied.location.searchParams.get('error'), 'access_denied');
    t.ok(denied.location.searchParams.get('error_description'));
    t.equal(denied.location.searchParams.get('code'), null, 'no code');

    oidc.next = { account: { email: uniqueEmail('oauth-pkce-unverified'), email_verified: false } };
    const unverified = await browse(app, await signInUrl(sb, APP_CALLBACK));
    t.equal(unverified.location.searchParams.get('error'), 'unverified_email', 'no account for an unverified email');
    t.equal(unverified.location.searchParams.get('code'), null);

    const email = uniqueEmail('oauth-pkce-banned');
    oidc.next = { account: { email, email_verified: true } };
    const first = await browse(app, await signInUrl(sb, APP_CALLBACK));
    t.equal((await sb.auth.exchangeCodeForSession(first.location.searchParams.get('code')!)).error, null, 'an account');
    await app.db.sql`update auth.users set banned_until = now() + interval '1 day' where email = ${email}`;
    oidc.next = { account: { email, email_verified: true } };
    const banned = await browse(app, await signInUrl(pkceClient(app).sb, APP_CALLBACK));
    t.equal(banned.location.searchParams.get('error'), 'access_denied', 'a banned user gets no code');
    t.match(banned.location.searchParams.get('error_description'), /banned/);
    t.equal(banned.location.searchParams.get('code'), null);
  });

  t.test('authorize refuses a redirect that is not allowed and a bad challenge', async (t) => {
    const r = await app.call('GET', `/auth/v1/authorize?provider=oidc&redirect_to=${encodeURIComponent('https://evil.example/cb')}`);
    t.equal(r.status, 400);
    t.match(r.body, { msg: /redirect_to is not an allowed redirect URL/ });
    const short = await app.call('GET', '/auth/v1/authorize?provider=oidc&code_challenge=abc&code_challenge_method=s256');
    t.equal(short.status, 400);
    t.match(short.body, { msg: /between 43 and 128/ });
    const method = await app.call('GET', `/auth/v1/authorize?provider=oidc&code_challenge=${'a'.repeat(43)}&code_challenge_method=md5`);
    t.equal(method.status, 400);
    t.match(method.body, { msg: /s256 or plain/ });
  });

  t.test('implicit flow under the setting: the session in redirect_to\'s fragment', async (t) => {
    const sb = createClient(app.url, app.anonKey, { auth: { flowType: 'implicit', persistSession: false, detectSessionInUrl: false } });
    const email = uniqueEmail('oauth-implicit');
    oidc.next = { account: { email, email_verified: true } };
    const url = await signInUrl(sb, APP_CALLBACK);
    t.equal(new URL(url).searchParams.get('code_challenge'), null, 'no challenge');
    const { location } = await browse(app, url);
    t.equal(location.origin + location.pathname, APP_CALLBACK, 'to redirect_to');
    t.equal(location.search, '', 'no code');
    const f = new URLSearchParams(location.hash.slice(1));
    const got = await sb.auth.getUser(f.get('access_token')!);
    t.equal(got.data.user?.email, email, 'a session in the fragment');
  });
});

t.test('default mode: redirect_to and code_challenge are ignored, the session in SITE_URL\'s fragment', async (t) => {
  const oidc = await startOidcProvider(t, { ...CLIENT, conformIdTokenClaims: true });
  const app = await service(t, oidc, false);
  const { sb } = pkceClient(app);
  const email = uniqueEmail('oauth-default');
  oidc.next = { account: { email, email_verified: true } };
  const url = await signInUrl(sb, APP_CALLBACK);
  t.ok(new URL(url).searchParams.get('code_challenge'), 'the same request');
  const { location } = await browse(app, url);
  t.equal(location.origin + location.pathname, `${SITE_URL}/`, 'SITE_URL');
  t.equal(location.searchParams.get('code'), null, 'no code');
  const f = new URLSearchParams(location.hash.slice(1));
  t.ok(f.get('access_token'), 'the session in the fragment');
  const me = await app.call('GET', '/auth/v1/user', { headers: { authorization: `Bearer ${f.get('access_token')}` } });
  t.equal((me.body as { email: string }).email, email);
  const pkce = await app.call('POST', '/auth/v1/token?grant_type=pkce', { body: { auth_code: 'x', code_verifier: 'y'.repeat(43) } });
  t.equal(pkce.status, 400, 'no pkce grant');
  t.match(pkce.body, { error: String });
});
