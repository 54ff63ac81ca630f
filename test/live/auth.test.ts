/**
 * WebSocket credentials that stay out of the URL, and sockets that live no longer than
 * their token: the `base64url.bearer.<token>` subprotocol entry (checked before the
 * upgrade like `?token=`, never echoed back), close code 4001 at the token's `exp`, and an
 * `auth` message with a fresher token of the same identity moving that deadline.
 */
import t from 'tap';
import { SignJWT } from 'jose';
import { startApp, TEST_JWT_SECRET, type TestApp } from '../helpers/app.ts';
import { open, refused, waitFor, type LiveClient } from './helpers.ts';

const KEY = new TextEncoder().encode(TEST_JWT_SECRET);
const USER = '6f1c1c2e-0d5e-4c43-9a53-2d3a1d3c9f01';

/** A token whose `exp` is `seconds` from now. */
function sign(claims: Record<string, unknown>, seconds: number, secret = KEY): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt(now).setExpirationTime(now + seconds).sign(secret);
}
const user = (seconds = 3600, extra: Record<string, unknown> = {}) => sign({ sub: USER, role: 'authenticated', aud: 'authenticated', ...extra }, seconds);

/** The subprotocols a client offers to authenticate with `token`. */
const bearer = (token: string) => ['plinth', `base64url.bearer.${Buffer.from(token).toString('base64url')}`];

async function fixtures(app: TestApp): Promise<void> {
  await app.db.sql.unsafe(`create table public.notes (id int primary key, body text);
    select live.subscribe('notes', 'select id, body from notes');
    select live.subscribe('team_notes', 'select id from notes', 'delta', '{"app_metadata": {"team": "red"}}');`);
}

/** `p`, or null when `ms` pass first (a deadline, not a pause). */
async function within<T>(p: Promise<T>, ms = 20_000): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<null>((r) => (timer = setTimeout(() => r(null), ms)));
  try {
    return await Promise.race([p, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** The socket is still open and served: a broadcast of its own comes back. */
async function served(c: LiveClient, tag: string): Promise<boolean> {
  c.send({ type: 'broadcast', payload: { tag } });
  return (await c.next((m) => m.type === 'broadcast' && m.payload?.tag === tag, 10_000)) !== undefined;
}

t.test('the token in Sec-WebSocket-Protocol, not in the URL', async (t) => {
  const app = await startApp(t);
  await fixtures(app);

  const c = await open(app, '/ws/notes', { protocols: bearer(await user()) });
  t.equal(c.ws.url.includes('?'), false, 'the URL carries no query string');
  t.equal((await c.next()).type, 'subscribed', 'a user JWT in the subprotocol is let in');
  t.equal(c.ws.protocol, 'plinth', 'the chosen subprotocol is plinth');
  t.equal(c.upgradeHeaders['sec-websocket-protocol'], 'plinth', 'only plinth is echoed, never the token');
  t.ok(await served(c, 'hello'), 'and served');
  c.ws.terminate();
  const [plinth, entry] = bearer(await user());
  const reversed = await open(app, '/ws/notes', { protocols: [entry, plinth] });
  t.equal(reversed.upgradeHeaders['sec-websocket-protocol'], 'plinth', 'plinth is echoed even when the token entry is offered first');
  reversed.ws.terminate();

  const anon = await open(app, '/ws/notes', { protocols: bearer(app.anonKey) });
  t.equal((await anon.next()).type, 'subscribed', 'the anon key in the subprotocol');
  anon.ws.terminate();

  const bad = { status: 401, body: { error: 'invalid or expired token' } };
  t.same(await refused(app, '/ws/notes', { protocols: bearer('not-a-jwt') }), bad, 'a malformed token: 401 before the upgrade');
  t.same(await refused(app, '/ws/notes', { protocols: bearer(await sign({ sub: USER, role: 'authenticated' }, 3600, new TextEncoder().encode('x'.repeat(40)))) }), bad, 'a token signed with another secret: 401');
  t.same(await refused(app, '/ws/notes', { protocols: bearer(await user(-10)) }), bad, 'an expired token: 401');
  t.same(await refused(app, '/ws/notes', { protocols: ['plinth', 'base64url.bearer.not*base64'] }), bad, 'an entry that is not base64url: 401');
  t.same(
    await refused(app, '/ws/notes', { protocols: bearer('not-a-jwt'), query: { token: app.anonKey } }),
    bad,
    'the subprotocol is read before ?token= (a bad one is not rescued by the query)',
  );
  t.same(await refused(app, '/ws/team_notes', { protocols: bearer(await user()) }), { status: 403, body: { error: 'audience not satisfied' } }, 'the audience applies as for ?token=');
  const red = await open(app, '/ws/team_notes', { protocols: bearer(await user(3600, { app_metadata: { team: 'red' } })) });
  t.equal((await red.next()).type, 'subscribed', 'a token that passes the audience');
  red.ws.terminate();

  const q = await open(app, '/ws/notes', { query: { token: await user() } });
  t.equal((await q.next()).type, 'subscribed', '?token= still works');
  q.ws.terminate();
});

t.test('a socket closes with 4001 when its token expires', async (t) => {
  const app = await startApp(t);
  await fixtures(app);
  for (const [how, opts] of [
    ['in the subprotocol', async () => ({ protocols: bearer(await user(2)) })],
    ['as ?token=', async () => ({ query: { token: await user(2) } })],
  ] as const) {
    const c = await open(app, '/ws/notes', await opts());
    t.equal((await c.next()).type, 'subscribed', `let in with a token ${how} that expires in 2 s`);
    t.same(await within(c.closed), { code: 4001, reason: 'token expired' }, `closed with 4001 at exp (${how})`);
  }

  // A fresher token of the same user moves the deadline.
  const first = await user(2);
  const exp = JSON.parse(Buffer.from(first.split('.')[1], 'base64url').toString()).exp as number;
  const c = await open(app, '/ws/notes', { protocols: bearer(first) });
  t.equal((await c.next()).type, 'subscribed');
  c.send({ type: 'auth', token: await user(3600) });
  await waitFor(() => Date.now() > exp * 1000 + 1500, 20_000, 'the first token to expire');
  t.ok(await served(c, 'after exp'), 'an auth message with a fresher token keeps the socket past the first exp');
  c.ws.terminate();

  // A token of another user, or one that does not verify, ends the socket at once.
  for (const [what, token] of [
    ['another user', await sign({ sub: '00000000-0000-4000-8000-000000000000', role: 'authenticated' }, 3600)],
    ['the anon key', app.anonKey],
    ['a token that does not verify', 'not-a-jwt'],
  ] as const) {
    const s = await open(app, '/ws/notes', { protocols: bearer(await user()) });
    t.equal((await s.next()).type, 'subscribed');
    s.send({ type: 'auth', token });
    t.same(await within(s.closed), { code: 4001, reason: 'invalid token' }, `an auth message with ${what}: 4001`);
  }

  // A burst of auth messages is checked one at a time (at most one database round trip per socket).
  const burst = await open(app, '/ws/notes', { protocols: bearer(await user()) });
  t.equal((await burst.next()).type, 'subscribed');
  const fresh = await user(3600);
  for (let i = 0; i < 200; i++) burst.send({ type: 'auth', token: fresh });
  t.ok(await served(burst, 'after the burst'), 'a burst of good tokens leaves the socket open');
  for (let i = 0; i < 50; i++) burst.send({ type: 'auth', token: i === 49 ? 'not-a-jwt' : fresh });
  t.same(await within(burst.closed), { code: 4001, reason: 'invalid token' }, 'one ending with a bad token closes it');

  // The audience is checked again with the new claims.
  const red = await open(app, '/ws/team_notes', { protocols: bearer(await user(3600, { app_metadata: { team: 'red' } })) });
  t.equal((await red.next()).type, 'subscribed');
  red.send({ type: 'auth', token: await user(3600, { app_metadata: { team: 'blue' } }) });
  t.same(await within(red.closed), { code: 4001, reason: 'invalid token' }, 'a fresher token that no longer passes the audience: 4001');

  // The anon key lives ten years, past what one timer can wait: the socket is not closed at once.
  const anon = await open(app, '/ws/notes', { protocols: bearer(app.anonKey) });
  t.equal((await anon.next()).type, 'subscribed');
  t.ok(await served(anon, 'anon'), 'a ten-year key is served (its deadline is beyond one timer)');
  anon.ws.terminate();
});
