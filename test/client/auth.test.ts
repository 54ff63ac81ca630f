/**
 * The client's auth in Node against a real plinth (issue 16 §2): memory storage outside
 * browsers (or the `storage` given), email verification and magic link through real mail,
 * guests, refresh (timer, explicit, reuse detection → SIGNED_OUT, a network failure keeps
 * the session), updateUser, signOut, and `{data, error}` everywhere.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { startProxy } from '../helpers/proxy.ts';
import { PASSWORD, linksOf, refresh, startSmtp, tokenOfLink, uniqueEmail } from '../auth/helpers.ts';
import { createClient, MemoryStorage, type AuthChangeEvent } from '../../src/client/index.ts';

const smtp = await startSmtp(t);
const app = await startApp(t, {
  env: { AUTH_RATE_LIMIT: '0', REQUIRE_EMAIL_VERIFICATION: 'true', ALLOW_ANONYMOUS_SIGNIN: 'true', SMTP_URL: smtp.url },
});

function recorder(c: ReturnType<typeof createClient>) {
  const events: AuthChangeEvent[] = [];
  c.auth.onAuthStateChange((e) => events.push(e));
  return events;
}

/** A confirmed account (signup, then the emailed verification link through the client). */
async function confirmedUser(t: Tap, email = uniqueEmail('node')) {
  const c = createClient(app.url, app.anonKey);
  const up = await c.auth.signUp({ email, password: PASSWORD });
  t.equal(up.error, null);
  t.equal(up.data?.session, null, 'verification on: no session yet');
  t.equal(up.data?.message, 'check your email to confirm your address');
  const early = await c.auth.signInWithPassword({ email, password: PASSWORD });
  t.same(early.error && { status: early.error.status, message: early.error.message }, { status: 403, message: 'email not verified' });
  const mail = await smtp.next(email, 20_000);
  const v = await c.auth.verifyOtp({ type: 'signup', token: tokenOfLink(linksOf(mail.text)[0]) });
  t.same(v, { data: { user: null, session: null, message: 'email verified' }, error: null });
  return email;
}

type Tap = { equal: typeof t.equal; same: typeof t.same };

t.test('sign-in, session in memory outside a browser, refresh, sign-out', async (t) => {
  const email = await confirmedUser(t);
  const c = createClient(app.url, app.anonKey);
  const events = recorder(c);
  const signIn = await c.auth.signInWithPassword({ email, password: PASSWORD });
  t.equal(signIn.error, null);
  const first = signIn.data!.session!;
  t.equal(first.user?.email, email);
  t.ok(first.expires_at > Date.now() / 1000 + 3500, 'expires_at from the token');
  t.equal((globalThis as { sessionStorage?: unknown }).sessionStorage, undefined, 'no sessionStorage in Node');
  const again = createClient(app.url, app.anonKey);
  t.equal((await again.auth.getSession()).data?.session, null, 'another client (another "tab") has its own memory');

  const r = await c.auth.refreshSession();
  t.equal(r.error, null);
  t.not(r.data?.session?.refresh_token, first.refresh_token);
  t.equal(r.data?.user?.email, email);
  const me = await c.auth.getUser();
  t.equal(me.data?.user.email, email);

  const bad = await c.auth.updateUser({ email: 'not an address' });
  t.same(bad.error && { status: bad.error.status, message: bad.error.message }, { status: 400, message: 'invalid email address' });
  const upd = await c.auth.updateUser({ data: { theme: 'dark' } });
  t.same(upd.data?.user.user_metadata, { theme: 'dark' });

  const out = await c.auth.signOut();
  t.equal(out.error, null);
  t.equal((await c.auth.getSession()).data?.session, null);
  t.same(await c.auth.signOut(), { error: null }, 'signing out twice is fine');
  t.same(events, ['SIGNED_IN', 'TOKEN_REFRESHED', 'USER_UPDATED', 'SIGNED_OUT']);
  const dead = await refresh(app, r.data!.session!.refresh_token);
  t.equal(dead.status, 401);
});

t.test('the refresh timer fires `refreshLeadSeconds` before expiry, in Node too', async (t) => {
  const email = await confirmedUser(t);
  const c = createClient(app.url, app.anonKey, { auth: { refreshLeadSeconds: 3599 } });
  const events = recorder(c);
  await c.auth.signInWithPassword({ email, password: PASSWORD });
  const deadline = Date.now() + 15_000;
  while (!events.includes('TOKEN_REFRESHED') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.same(events, ['SIGNED_IN', 'TOKEN_REFRESHED']);
  c.auth.stopAutoRefresh();
});

t.test('a replayed refresh token signs out; a network failure does not', async (t) => {
  const email = await confirmedUser(t);
  const port = Number(new URL(app.url).port);
  const proxy = await startProxy('127.0.0.1', port);
  t.teardown(() => proxy.close());
  const c = createClient(`http://127.0.0.1:${proxy.port}`, app.anonKey, { auth: { autoRefreshToken: false } });
  const events = recorder(c);
  await c.auth.signInWithPassword({ email, password: PASSWORD });
  proxy.cut();
  const down = await c.auth.refreshSession();
  t.equal(down.error?.status, 0);
  t.match(down.error?.message, /^network error/);
  t.ok((await c.auth.getSession()).data?.session, 'the session survives a network failure');
  proxy.restore();
  const up = await c.auth.refreshSession();
  t.equal(up.error, null);

  const stolen = up.data!.session!.refresh_token;
  t.equal((await refresh(app, stolen)).status, 200, 'someone else rotates it first');
  const replay = await c.auth.refreshSession();
  t.same(replay.error && { status: replay.error.status, message: replay.error.message }, {
    status: 401,
    message: 'refresh token reuse detected — please log in again',
  });
  t.equal((await c.auth.getSession()).data?.session, null);
  t.same(events, ['SIGNED_IN', 'TOKEN_REFRESHED', 'SIGNED_OUT']);
});

t.test('magic link outside a browser: verifyOtp follows the link', async (t) => {
  const email = await confirmedUser(t);
  const c = createClient(app.url, app.anonKey);
  const events = recorder(c);
  const sent = await c.auth.signInWithOtp({ email });
  t.equal(sent.error, null);
  const mail = await smtp.next(email, 20_000);
  const token = tokenOfLink(linksOf(mail.text)[0]);
  const v = await c.auth.verifyOtp({ type: 'magiclink', token });
  t.equal(v.error, null);
  t.equal(v.data?.user?.email, email);
  t.same(events, ['SIGNED_IN']);
  const used = await c.auth.verifyOtp({ type: 'magiclink', token });
  t.same(used.error && { status: used.error.status, message: used.error.message }, { status: 400, message: 'invalid or expired token' });
});

t.test('guests, the storage option and persistSession', async (t) => {
  const store = new MemoryStorage();
  const c = createClient(app.url, app.anonKey, { auth: { storage: store, storageKey: 'mine' } });
  const g = await c.auth.signInAnonymously();
  t.equal(g.error, null);
  t.equal(g.data?.user?.email, null);
  t.equal(g.data?.user?.role, 'anonymous');
  t.equal(JSON.parse(store.getItem('mine')!).access_token, g.data?.session?.access_token, 'kept in the storage given');
  const revived = createClient(app.url, app.anonKey, { auth: { storage: store, storageKey: 'mine' } });
  t.equal((await revived.auth.getUser()).data?.user.id, g.data?.user?.id, 'a new client reads the stored session');

  const ephemeral = createClient(app.url, app.anonKey, { auth: { storage: store, storageKey: 'eph', persistSession: false } });
  await ephemeral.auth.signInAnonymously();
  t.equal(store.getItem('eph'), null, 'persistSession false: memory only');

  const unsub = createClient(app.url, app.anonKey);
  const seen: string[] = [];
  const { data } = unsub.auth.onAuthStateChange((e) => seen.push(e));
  data.subscription.unsubscribe();
  await unsub.auth.signInAnonymously();
  t.same(seen, [], 'unsubscribed');

  const oauth = await c.auth.signInWithOAuth({ provider: 'github' });
  t.same(oauth, { data: { provider: 'github', url: `${app.url}/auth/v1/authorize?provider=github` }, error: null }, 'outside a browser: the URL only');
  const wrong = await c.auth.signInWithPassword({ email: uniqueEmail(), password: PASSWORD });
  t.same(wrong.data, null);
  t.same(wrong.error && { status: wrong.error.status, message: wrong.error.message }, { status: 401, message: 'invalid email or password' });
  t.equal((await c.auth.getUser()).data?.user.id, g.data?.user?.id, 'a failed sign-in leaves the session alone');
  const reset = await c.auth.resetPasswordForEmail(uniqueEmail());
  t.equal(reset.error, null);
  t.ok(reset.data?.message);

  const sent: { url: string; headers: Headers }[] = [];
  const rec = createClient(app.url, app.anonKey, {
    headers: { 'x-client-info': 'plinth-test' },
    fetch: (input, init) => {
      sent.push({ url: input instanceof Request ? input.url : input.toString(), headers: new Headers(init?.headers) });
      return fetch(input, init);
    },
  });
  const before = await rec.from('nothing_here').select('*');
  t.same({ status: before.status, message: before.error?.message }, { status: 404, message: 'relation not found' });
  const guest = await rec.auth.signInAnonymously();
  await rec.rpc('nothing_here');
  await rec.auth.getUser();
  t.same(sent.map((s) => new URL(s.url).pathname), ['/rest/v1/nothing_here', '/auth/v1/anonymous', '/rest/v1/rpc/nothing_here', '/auth/v1/user'], 'the fetch option carries every request');
  t.ok(sent.every((s) => s.headers.get('x-client-info') === 'plinth-test' && s.headers.get('apikey') === app.anonKey), 'headers and apikey on every request');
  t.equal(sent[0].headers.get('authorization'), `Bearer ${app.anonKey}`, 'signed out: the anon key');
  t.equal(sent[1].headers.get('authorization'), null, 'auth endpoints of level None get no Authorization');
  t.equal(sent[2].headers.get('authorization'), `Bearer ${guest.data?.session?.access_token}`, 'signed in: the access token');
  t.equal(sent[3].headers.get('authorization'), `Bearer ${guest.data?.session?.access_token}`);
});
