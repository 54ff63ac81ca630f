/**
 * SUPABASE_COMPAT: supabase-js with `flowType: 'pkce'`, unchanged: signInWithOtp and
 * resetPasswordForEmail send a code challenge; the mailed link (read from a real SMTP
 * receiver) redirects with `?code=`; exchangeCodeForSession answers the session (SIGNED_IN,
 * PASSWORD_RECOVERY). A code works once, with its own verifier only. Without the setting,
 * `grant_type=pkce` is refused as any unknown grant.
 */
import t from 'tap';
import { createClient, type AuthChangeEvent, type SupabaseClient } from '@supabase/supabase-js';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, linksOf, startSmtp, uniqueEmail } from './helpers.ts';

const SITE = 'http://app.plinth.test';

t.test('supabase-js PKCE against SUPABASE_COMPAT=true', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startApp(t, {
    env: { SUPABASE_COMPAT: 'true', AUTH_RATE_LIMIT: '0', SMTP_URL: smtp.url, SITE_URL: SITE, ADDITIONAL_REDIRECT_URLS: 'http://localhost:5173/**' },
  });

  /** A PKCE client with its own storage (where auth-js keeps the code verifier), and the events it fires. */
  function pkceClient(): { sb: SupabaseClient; events: AuthChangeEvent[] } {
    const store = new Map<string, string>();
    const sb = createClient(app.url, app.anonKey, {
      auth: {
        flowType: 'pkce',
        persistSession: true,
        autoRefreshToken: false,
        detectSessionInUrl: false,
        storageKey: `sb-pkce-${Math.random()}`,
        storage: { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => void store.set(k, v), removeItem: (k) => void store.delete(k) },
      },
    });
    const events: AuthChangeEvent[] = [];
    sb.auth.onAuthStateChange((e) => void events.push(e));
    return { sb, events };
  }

  /** Open a mailed link as a browser would; the Location plinth answers. */
  async function follow(link: string): Promise<URL> {
    const u = new URL(link);
    const r = await fetch(app.url + u.pathname + u.search, { redirect: 'manual' });
    t.equal(r.status, 303, 'the link redirects');
    return new URL(r.headers.get('location')!);
  }

  t.test('magic link: ?code= on the redirect, exchangeCodeForSession, once', async (t) => {
    const { sb, events } = pkceClient();
    const email = uniqueEmail('pkce');
    const sent = await sb.auth.signInWithOtp({ email, options: { emailRedirectTo: 'http://localhost:5173/callback', data: { plan: 'pro' } } });
    t.equal(sent.error, null, 'signInWithOtp with a code challenge');
    const to = await follow(linksOf((await smtp.next(email)).text)[0]);
    t.equal(to.origin + to.pathname, 'http://localhost:5173/callback', 'to the redirect');
    t.equal(to.hash, '', 'no session in the fragment');
    const code = to.searchParams.get('code');
    t.ok(code, 'an auth code in the query');

    const ex = await sb.auth.exchangeCodeForSession(code!);
    t.equal(ex.error, null, 'exchangeCodeForSession');
    t.equal(ex.data.user?.email, email);
    t.equal(ex.data.user?.user_metadata.plan, 'pro', 'the account made by this mail keeps its data');
    t.type(ex.data.session?.expires_at, 'number');
    t.ok(events.includes('SIGNED_IN'), 'SIGNED_IN');
    t.equal((await sb.auth.getUser()).data.user?.email, email, 'signed in');

    // The same code again, through the HTTP API with any verifier: the flow is spent.
    const again = await fetch(`${app.url}/auth/v1/token?grant_type=pkce`, {
      method: 'POST',
      headers: { apikey: app.anonKey, 'content-type': 'application/json' },
      body: JSON.stringify({ auth_code: code, code_verifier: 'x'.repeat(43) }),
    });
    t.equal(again.status, 404);
    t.match(await again.json(), { error_code: 'flow_state_not_found' });
  });

  t.test('a code with another verifier is refused, and spent', async (t) => {
    const { sb } = pkceClient();
    const email = uniqueEmail('pkce-wrong');
    await sb.auth.signInWithOtp({ email });
    const to = await follow(linksOf((await smtp.next(email)).text)[0]);
    t.equal(to.origin, SITE, 'no redirect given: SITE_URL');
    const code = to.searchParams.get('code')!;
    const thief = pkceClient(); // another browser: its own verifier
    await thief.sb.auth.signInWithOtp({ email: uniqueEmail('thief') });
    const stolen = await thief.sb.auth.exchangeCodeForSession(code);
    t.equal(stolen.error?.code, 'bad_code_verifier', 'another verifier does not answer the challenge');
    t.equal(stolen.error?.status, 400);
    const late = await sb.auth.exchangeCodeForSession(code);
    t.equal(late.error?.code, 'flow_state_not_found', 'a code is tried once');
  });

  t.test('the 6-digit code of a PKCE mail still answers a session (verifyOtp); then the link is spent', async (t) => {
    const { sb } = pkceClient();
    const email = uniqueEmail('pkce-otp');
    await sb.auth.signInWithOtp({ email });
    const mail = await smtp.next(email);
    const otp = /code: (\d{6})/.exec(mail.text)![1];
    const v = await sb.auth.verifyOtp({ email, token: otp, type: 'email' });
    t.equal(v.error, null, 'verifyOtp');
    const to = await follow(linksOf(mail.text)[0]);
    t.equal(to.searchParams.get('code'), null, 'no code');
    t.match(to.hash, /error_code=otp_expired/, 'the link is spent');
  });

  t.test('recovery: PASSWORD_RECOVERY after the exchange, then updateUser', async (t) => {
    const email = uniqueEmail('pkce-rec');
    await createClient(app.url, app.anonKey, { auth: { persistSession: false } }).auth.signUp({ email, password: PASSWORD });
    const { sb, events } = pkceClient();
    t.equal((await sb.auth.resetPasswordForEmail(email, { redirectTo: `${SITE}/reset` })).error, null);
    let mail = await smtp.next(email);
    while (!/type=recovery/.test(mail.text)) mail = await smtp.next(email);
    const to = await follow(linksOf(mail.text)[0]);
    t.equal(to.origin + to.pathname, `${SITE}/reset`);
    const ex = await sb.auth.exchangeCodeForSession(to.searchParams.get('code')!);
    t.equal(ex.error, null, 'exchangeCodeForSession');
    t.ok(events.includes('PASSWORD_RECOVERY'), 'PASSWORD_RECOVERY');
    t.equal((await sb.auth.updateUser({ password: 'a pkce new password' })).error, null, 'updateUser');
    const signIn = await createClient(app.url, app.anonKey, { auth: { persistSession: false } }).auth.signInWithPassword({ email, password: 'a pkce new password' });
    t.equal(signIn.error, null, 'the new password works');
  });

  t.test('bad challenges and exchanges', async (t) => {
    const post = (path: string, body: unknown) =>
      fetch(`${app.url}/auth/v1/${path}`, { method: 'POST', headers: { apikey: app.anonKey, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const email = uniqueEmail('pkce-bad');
    const short = await post('otp', { email, code_challenge: 'abc', code_challenge_method: 's256' });
    t.equal(short.status, 400);
    t.match(await short.json(), { error_code: 'validation_failed', msg: /between 43 and 128/ });
    const half = await post('otp', { email, code_challenge: 'a'.repeat(43) });
    t.match(await half.json(), { error_code: 'validation_failed', msg: /requires code_challenge_method and code_challenge/ });
    const method = await post('recover', { email, code_challenge: 'a'.repeat(43), code_challenge_method: 'md5' });
    t.equal(method.status, 400, 'an unknown method');
    const empty = await post('token?grant_type=pkce', { auth_code: '', code_verifier: 'v' });
    t.equal(empty.status, 400);
    t.match(await empty.json(), { error_code: 'validation_failed' });
    const unknown = await post('token?grant_type=pkce', { auth_code: 'nope', code_verifier: 'v'.repeat(43) });
    t.equal(unknown.status, 404, 'an unknown code');
  });
});

t.test('default mode: grant_type=pkce is refused as any unknown grant; a challenge changes nothing', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startApp(t, { env: { AUTH_RATE_LIMIT: '0', SMTP_URL: smtp.url, SITE_URL: SITE } });
  const post = (path: string, body: unknown) =>
    fetch(`${app.url}/auth/v1/${path}`, { method: 'POST', headers: { apikey: app.anonKey, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  for (const r of [
    await post('token?grant_type=pkce', { auth_code: 'x', code_verifier: 'y' }),
    await post('token', { grant_type: 'pkce', auth_code: 'x', code_verifier: 'y' }),
    await post('token', { grant_type: 'nonsense' }),
  ]) {
    t.equal(r.status, 400);
    t.same(await r.json(), { error: 'invalid request body' });
  }
  const email = uniqueEmail('default-pkce');
  await post('signup', { email, password: PASSWORD });
  const rec = await post('recover', { email, code_challenge: 'a'.repeat(43), code_challenge_method: 's256' });
  t.equal(rec.status, 200, 'recover ignores a challenge');
  let mail = await smtp.next(email);
  while (!/reset-password\?token=/.test(mail.text)) mail = await smtp.next(email);
  t.match(linksOf(mail.text)[0], `${SITE}/reset-password?token=`, 'the default mode\'s recovery link');
});
