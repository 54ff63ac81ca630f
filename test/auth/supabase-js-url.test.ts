/**
 * SUPABASE_COMPAT: the page a mailed link lands on. supabase-js in a (minimal) browser
 * environment, `detectSessionInUrl` on, at the URL plinth redirected to: a magic link
 * fires SIGNED_IN, a recovery link PASSWORD_RECOVERY, each with the session of the link.
 * (A file of its own: the globals it sets would make the other tests' clients browsers.)
 */
import t from 'tap';
import { createClient, type AuthChangeEvent } from '@supabase/supabase-js';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, linksOf, startSmtp, uniqueEmail } from './helpers.ts';

const SITE = 'http://app.plinth.test';

interface FakeWindow {
  location: { href: string; hash: string };
}

/** Just enough of a browser for auth-js: a location, a history, listeners that do nothing. */
function browserAt(href: string): void {
  const g = globalThis as unknown as Record<string, unknown>;
  const noop = () => {};
  const location = { href, hash: new URL(href).hash };
  g.window = { location, history: { state: null, replaceState: noop }, addEventListener: noop, removeEventListener: noop } satisfies FakeWindow & Record<string, unknown>;
  g.document = { visibilityState: 'hidden', addEventListener: noop, removeEventListener: noop };
}

t.teardown(() => {
  const g = globalThis as unknown as Record<string, unknown>;
  delete g.window;
  delete g.document;
});

t.test('detectSessionInUrl at the redirect of a mailed link', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startApp(t, { env: { SUPABASE_COMPAT: 'true', AUTH_RATE_LIMIT: '0', SMTP_URL: smtp.url, SITE_URL: SITE } });
  const server = createClient(app.url, app.anonKey, { auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false } });

  /** Follow a mailed link to plinth; the Location it answers. */
  async function landing(text: string): Promise<string> {
    const u = new URL(linksOf(text)[0]);
    const r = await fetch(app.url + u.pathname + u.search, { redirect: 'manual' });
    if (r.status !== 303) throw new Error(`verify: ${r.status}`);
    return r.headers.get('location')!;
  }

  /** A page's client at `href`: the events it fires while it initialises, and its session. */
  async function pageAt(href: string) {
    browserAt(href);
    const store = new Map<string, string>();
    const events: AuthChangeEvent[] = [];
    const page = createClient(app.url, app.anonKey, {
      auth: {
        detectSessionInUrl: true,
        persistSession: true,
        autoRefreshToken: false,
        storageKey: `sb-${Math.random()}`,
        storage: { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => void store.set(k, v), removeItem: (k) => void store.delete(k) },
      },
    });
    page.auth.onAuthStateChange((e) => void events.push(e));
    const { data, error } = await page.auth.getSession();
    // The tab-sync channel a browser client opens would keep the test alive.
    t.teardown(() => (page.auth as unknown as { broadcastChannel: BroadcastChannel | null }).broadcastChannel?.close());
    return { events, session: data.session, error, page };
  }

  /** auth-js fires the event of the URL just after it initialised: wait for it, with a deadline. */
  async function fired(events: AuthChangeEvent[], e: AuthChangeEvent): Promise<boolean> {
    const deadline = Date.now() + 5000;
    while (!events.includes(e) && Date.now() < deadline) await new Promise((r) => setImmediate(r));
    return events.includes(e);
  }

  const email = uniqueEmail('url');
  await server.auth.signUp({ email, password: PASSWORD });

  await t.test('magic link: SIGNED_IN', async (t) => {
    t.equal((await server.auth.signInWithOtp({ email, options: { emailRedirectTo: `${SITE}/welcome` } })).error, null);
    const href = await landing((await smtp.next(email)).text);
    t.match(href, new RegExp(`^${SITE}/welcome#access_token=`));
    const p = await pageAt(href);
    t.equal(p.error, null);
    t.equal(p.session?.user.email, email, 'the page holds the session of the link');
    t.ok(await fired(p.events, 'SIGNED_IN'), `SIGNED_IN among ${p.events.join(', ')}`);
  });

  await t.test('recovery: PASSWORD_RECOVERY, then updateUser sets the password', async (t) => {
    t.equal((await server.auth.resetPasswordForEmail(email, { redirectTo: `${SITE}/reset` })).error, null);
    let mail = await smtp.next(email);
    if (mail.subject !== 'Reset your password') mail = await smtp.next(email);
    const href = await landing(mail.text);
    const p = await pageAt(href);
    t.equal(p.session?.user.email, email);
    t.ok(await fired(p.events, 'PASSWORD_RECOVERY'), `PASSWORD_RECOVERY among ${p.events.join(', ')}`);
    t.equal((await p.page.auth.updateUser({ password: 'recovered password' })).error, null);
    t.equal((await server.auth.signInWithPassword({ email, password: 'recovered password' })).error, null);
  });
});
