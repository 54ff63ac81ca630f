/**
 * The live result set in Node (issue 16 §6): ResultSet and SeqTracker, then LiveQuery over
 * a real WebSocket against a scripted server on loopback (fastify + @fastify/websocket)
 * speaking interface §6.2: deltas applied, duplicates ignored, a seq gap / overflow /
 * invalidated → refetch, deltas arriving during a refetch, broadcast and presence frames,
 * reconnect with backoff and a fresh token, close. The token travels in the subprotocols,
 * not the URL; a refreshed token is sent as an `auth` message. The real service is driven
 * in browser-live.test.ts.
 */
import t from 'tap';
import Fastify from 'fastify';
import websocket from '@fastify/websocket';
import { SignJWT } from 'jose';
import { createClient, LiveQuery, ResultSet, SeqTracker, type Row } from '../../src/client/index.ts';
import { startApp, TEST_JWT_SECRET } from '../helpers/app.ts';

async function waitFor(cond: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

t.test('ResultSet: whole-row multiset semantics', async (t) => {
  const s = new ResultSet();
  s.replace([{ id: 1, t: 'a' }]);
  s.apply({ inserted: [{ id: 2, t: 'b' }] });
  t.same(s.rows, [{ id: 1, t: 'a' }, { id: 2, t: 'b' }]);
  s.apply({ deleted: [{ t: 'a', id: 1 }], inserted: [{ id: 1, t: 'A' }] });
  t.same(s.rows, [{ id: 2, t: 'b' }, { id: 1, t: 'A' }], 'rows compare whole, key order aside');
  s.apply({ deleted: [{ id: 9, t: 'z' }] });
  t.equal(s.rows.length, 2, 'deleting an absent row changes nothing');
  s.apply({ inserted: [{ id: 2, t: 'b' }] });
  t.equal(s.rows.length, 3, 'a duplicate row is a second row');
  s.apply({ deleted: [{ id: 2, t: 'b' }] });
  t.same(s.rows, [{ id: 1, t: 'A' }, { id: 2, t: 'b' }], 'one delete removes one copy');
  s.apply({ inserted: [{ id: 2, t: 'b' }, { id: 3, t: 'c' }] }, true);
  t.same(s.rows, [{ id: 1, t: 'A' }, { id: 2, t: 'b' }, { id: 3, t: 'c' }], 'idempotent: a row already there is not added again');
  s.apply({ inserted: [{ id: 4, j: { b: 1, a: [1, { y: 2, x: 1 }] } }] });
  s.apply({ deleted: [{ j: { a: [1, { x: 1, y: 2 }], b: 1 }, id: 4 }] });
  t.equal(s.rows.length, 3, 'nested objects compare whole too');
});

t.test('SeqTracker: baseline, order, gaps, duplicates', async (t) => {
  const q = new SeqTracker();
  t.equal(q.next(7), 'apply', 'the first seq seen is the baseline');
  t.equal(q.next(8), 'apply');
  t.equal(q.next(8), 'old');
  t.equal(q.next(3), 'old');
  t.equal(q.next(10), 'gap');
  t.equal(q.next(11), 'apply');
  q.reset();
  t.equal(q.next(1), 'apply', 'after a reset any seq is the new baseline');
});

interface ServerSocket {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  terminate(): void;
  on(event: 'message', cb: (m: Buffer) => void): void;
}

interface Conn {
  socket: ServerSocket;
  token: string;
  /** The socket's URL (path and query) and the subprotocol the server chose. */
  url: string;
  protocol: string;
  frames: any[];
}

/** The token of a `base64url.bearer.<token>` subprotocol entry ('' when there is none). */
function protocolToken(header: string | undefined): string {
  const entry = (header ?? '').split(',').map((p) => p.trim()).find((p) => p.startsWith('base64url.bearer.'));
  return entry ? Buffer.from(entry.slice('base64url.bearer.'.length), 'base64url').toString() : '';
}

async function scriptedServer(t: { teardown(fn: () => unknown): void }) {
  const app = Fastify();
  await app.register(websocket);
  const conns: Conn[] = [];
  const presenceCalls: Record<string, string | undefined>[] = [];
  let refuse = false;
  let snapshots = false;
  let attempts = 0;
  app.get('/ws/_presence/:channel', async (req) => {
    presenceCalls.push({ authorization: req.headers.authorization, apikey: req.headers.apikey as string | undefined });
    return { earlier: { name: 'already here' } };
  });
  app.get('/ws/:id', { websocket: true }, (socket, req) => {
    attempts++;
    const token = protocolToken(req.headers['sec-websocket-protocol']);
    const conn: Conn = { socket: socket as unknown as ServerSocket, token, url: req.url, protocol: socket.protocol, frames: [] };
    if (refuse) {
      socket.close(1011, 'refused');
      return;
    }
    conns.push(conn);
    socket.on('message', (m: Buffer) => conn.frames.push(JSON.parse(m.toString())));
    const subscribed = { type: 'subscribed', query_id: (req.params as { id: string }).id, client_id: `client-${conns.length}` };
    socket.send(JSON.stringify(snapshots ? { ...subscribed, snapshot: true } : subscribed));
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  t.teardown(() => app.close());
  const addr = app.server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${addr.port}`,
    conns,
    presenceCalls,
    get attempts() {
      return attempts;
    },
    set refuse(v: boolean) {
      refuse = v;
    },
    /** `subscribed` says the server answers `{type: snapshot}` (plinth's does, decision 0300). */
    set snapshots(v: boolean) {
      snapshots = v;
    },
    send(msg: unknown, i = conns.length - 1) {
      conns[i].socket.send(JSON.stringify(msg));
    },
  };
}

t.test('LiveQuery over a real WebSocket', async (t) => {
  const srv = await scriptedServer(t);
  let table: Row[] = [{ id: 1, title: 'one' }];
  let tokens = 0;
  let gate: Promise<void> | null = null;
  const q = new LiveQuery(
    'todos',
    { url: srv.url, fetch: (i, init) => fetch(i, init), anonKey: 'ANON', getToken: async () => `token-${++tokens}` },
    {
      minDelayMs: 10,
      maxDelayMs: 40,
      refetch: async () => {
        if (gate) await gate;
        return { data: table.map((r) => ({ ...r })), error: null };
      },
    },
  );
  t.teardown(() => q.close());
  const changes: Row[][] = [];
  const statuses: string[] = [];
  const presences: Record<string, unknown>[] = [];
  const broadcasts: unknown[] = [];
  q.on('change', (rows) => changes.push(rows));
  q.on('status', (s) => statuses.push(s));
  q.on('presence', (p) => presences.push(p));
  q.on('broadcast', (payload, from) => broadcasts.push({ payload, from }));

  await waitFor(() => q.status === 'subscribed' && q.refetches === 1 && changes.length === 1, 'subscribed and loaded');
  t.equal(srv.conns[0].token, 'token-1', 'connected with the session token, in the subprotocols');
  t.equal(srv.conns[0].url, '/ws/todos', 'the URL carries no token');
  t.equal(srv.conns[0].protocol, 'plinth', 'plinth offered first, so a server echoes it');
  t.equal(q.clientId, 'client-1');
  t.same(q.rows, [{ id: 1, title: 'one' }], 'initial rows from refetch');
  await waitFor(() => srv.presenceCalls.length === 1 && q.presence.earlier !== undefined, 'presence loaded');
  t.same(srv.presenceCalls[0], { authorization: 'Bearer token-1', apikey: 'ANON' });

  // Deltas.
  table = [...table, { id: 2, title: 'two' }];
  srv.send({ query_id: 'todos', seq: 1, inserted: [{ id: 2, title: 'two' }], deleted: [] });
  await waitFor(() => q.rows.length === 2, 'delta 1');
  table = [{ id: 1, title: 'ONE' }, { id: 2, title: 'two' }];
  srv.send({ query_id: 'todos', seq: 2, inserted: [{ id: 1, title: 'ONE' }], deleted: [{ title: 'one', id: 1 }] });
  await waitFor(() => q.rows.some((r) => r.title === 'ONE'), 'delta 2');
  t.same(q.rows, [{ id: 2, title: 'two' }, { id: 1, title: 'ONE' }]);
  srv.send({ query_id: 'todos', seq: 2, inserted: [{ id: 99, title: 'replayed' }], deleted: [] });
  srv.send({ query_id: 'todos', seq: 3, inserted: [{ id: 3, title: 'three' }], deleted: [] });
  table = [...table, { id: 3, title: 'three' }];
  await waitFor(() => q.rows.length === 3, 'delta 3');
  t.notOk(q.rows.some((r) => r.id === 99), 'a repeated seq is ignored');
  t.equal(q.refetches, 1, 'no refetch so far');

  // A gap: seq 4 never arrives.
  table = [...table, { id: 4, title: 'four' }, { id: 5, title: 'five' }];
  srv.send({ query_id: 'todos', seq: 5, inserted: [{ id: 5, title: 'five' }], deleted: [] });
  await waitFor(() => q.refetches === 2 && q.rows.length === 5, 'gap refetch');
  t.same(q.rows.map((r) => r.id), [1, 2, 3, 4, 5], 'rows replaced by the refetch');

  // overflow clears and refetches; invalidated refetches.
  table = [{ id: 7, title: 'seven' }];
  srv.send({ type: 'overflow', query_id: 'todos', seq: 6, fetch: true });
  await waitFor(() => q.refetches === 3 && q.rows.length === 1, 'overflow refetch');
  t.same(q.rows, [{ id: 7, title: 'seven' }]);
  table = [{ id: 7, title: 'seven' }, { id: 8, title: 'eight' }];
  srv.send({ type: 'invalidated', query_id: 'todos', seq: 7 });
  await waitFor(() => q.refetches === 4 && q.rows.length === 2, 'invalidated refetch');

  // A delta that arrives while a refetch runs is applied on top of its result, once.
  let open!: () => void;
  gate = new Promise((r) => (open = r));
  srv.send({ type: 'invalidated', query_id: 'todos', seq: 8 });
  await waitFor(() => q.refetches === 5, 'refetch started');
  srv.send({ query_id: 'todos', seq: 9, inserted: [{ id: 9, title: 'during' }], deleted: [{ id: 7, title: 'seven' }] });
  srv.send({ query_id: 'todos', seq: 10, inserted: [{ id: 8, title: 'eight' }], deleted: [] });
  // A broadcast behind them on the same socket: once it is seen, both deltas have arrived.
  srv.send({ type: 'broadcast', from: 'marker', payload: null });
  await waitFor(() => broadcasts.length === 1, 'the deltas reached the client during the refetch');
  broadcasts.length = 0;
  gate = null;
  open();
  await waitFor(() => q.rows.some((r) => r.id === 9), 'pending delta applied');
  t.same(q.rows, [{ id: 8, title: 'eight' }, { id: 9, title: 'during' }], 'seq 9 applied; seq 10 (already in the fetched rows) not doubled');

  // An error message (the server closes with 4002 next) reaches the caller's error listeners.
  const errors: string[] = [];
  q.on('error', (e) => errors.push(e.message));
  srv.send({ type: 'error', query_id: 'todos', error: 'subscription is broken' });
  await waitFor(() => errors.length === 1, 'the error event');
  t.same(errors, ['live query todos: subscription is broken']);

  // Broadcast and presence.
  t.equal(q.broadcast({ hi: 1 }), true);
  t.equal(q.track({ name: 'me' }), true);
  await waitFor(() => srv.conns[0].frames.length === 2, 'client frames');
  t.same(srv.conns[0].frames, [{ type: 'broadcast', payload: { hi: 1 } }, { type: 'presence', state: { name: 'me' } }]);
  srv.send({ type: 'broadcast', from: 'client-x', payload: { yo: true } });
  srv.send({ type: 'presence_join', channel: 'todos', client_id: 'client-x', state: { name: 'x' } });
  srv.send({ type: 'presence_state', channel: 'todos', client_id: 'client-x', state: { name: 'x2' } });
  srv.send({ type: 'presence_leave', channel: 'todos', client_id: 'earlier' });
  await waitFor(() => broadcasts.length === 1 && q.presence['client-x']?.name === 'x2' && !q.presence.earlier, 'broadcast and presence');
  t.same(broadcasts, [{ payload: { yo: true }, from: 'client-x' }]);
  t.same(q.presence, { 'client-x': { name: 'x2' } });

  // A refreshed token is sent on the open socket.
  t.equal(await q.reauthenticate(), true, 'reauthenticate sends the current token');
  await waitFor(() => srv.conns[0].frames.length === 3, 'auth frame');
  t.same(srv.conns[0].frames[2], { type: 'auth', token: 'token-2' });
  srv.conns[0].frames.pop();

  // The server drops the connection: reconnect with a fresh token, re-announce presence, refetch.
  const before = q.refetches;
  table = [{ id: 20, title: 'after reconnect' }];
  srv.conns[0].socket.terminate();
  await waitFor(() => srv.conns.length === 2 && q.status === 'subscribed' && q.refetches === before + 1 && q.rows.length === 1, 'reconnected');
  t.equal(srv.conns[1].token, 'token-3', 'a fresh token');
  t.equal(q.clientId, 'client-2');
  t.same(q.rows, [{ id: 20, title: 'after reconnect' }]);
  await waitFor(() => srv.conns[1].frames.length === 1, 'presence re-sent');
  t.same(srv.conns[1].frames, [{ type: 'presence', state: { name: 'me' } }]);
  srv.send({ query_id: 'todos', seq: 1, inserted: [{ id: 21, title: 'new numbering' }], deleted: [] });
  await waitFor(() => q.rows.length === 2, 'delta after reconnect');
  t.equal(q.refetches, before + 1, 'the seq baseline was reset: no gap');
  t.ok(statuses.includes('connecting'));

  q.close();
  t.equal(q.status, 'closed');
  t.equal(q.broadcast('x'), false, 'closed: nothing sent');
  const attempts = srv.attempts;
  // A witness dropped after the close, whose reconnect delay (80 ms) is longer than any of
  // q's (at most 40): once it is back, q would have come back first, had it been going to.
  const w = new LiveQuery(
    'todos',
    { url: srv.url, fetch: (i, init) => fetch(i, init), anonKey: 'ANON', getToken: async () => 'witness' },
    { minDelayMs: 80, maxDelayMs: 80, refetch: async () => ({ data: [], error: null }) },
  );
  t.teardown(() => w.close());
  await waitFor(() => w.status === 'subscribed', 'the witness connected');
  srv.conns[srv.conns.length - 1].socket.terminate();
  await waitFor(() => srv.conns.filter((c) => c.token === 'witness').length === 2 && w.status === 'subscribed', 'the witness reconnected');
  t.equal(srv.attempts, attempts + 2, 'no reconnect after close (the two attempts are the witness\'s)');
  w.close();
});

t.test('a service that sends snapshots: the result and its seq, deltas it holds dropped, later ones applied', async (t) => {
  const srv = await scriptedServer(t);
  srv.snapshots = true;
  let table: Row[] = [{ id: 1 }];
  const q = new LiveQuery(
    'todos',
    { url: srv.url, fetch: (i, init) => fetch(i, init), anonKey: 'ANON', getToken: async () => 'token' },
    { minDelayMs: 10, maxDelayMs: 40, refetch: async () => ({ data: table.map((r) => ({ ...r })), error: null }) },
  );
  t.teardown(() => q.close());
  const asked = (n: number) => srv.conns.at(-1)!.frames.filter((f) => f.type === 'snapshot').length === n;
  await waitFor(() => q.status === 'subscribed' && asked(1), 'the snapshot asked for after subscribed');
  // Deltas sent before the answer: seq 3 is in the snapshot (seq 4), seq 5 is not.
  srv.send({ query_id: 'todos', seq: 3, inserted: [{ id: 3 }], deleted: [] });
  srv.send({ query_id: 'todos', seq: 5, inserted: [{ id: 5 }], deleted: [] });
  srv.send({ type: 'snapshot', query_id: 'todos', seq: 4, rows: [{ id: 1 }, { id: 3 }, { id: 4 }] });
  await waitFor(() => q.snapshots === 1 && q.rows.length === 4, 'the snapshot and the delta after it');
  t.same(q.rows, [{ id: 1 }, { id: 3 }, { id: 4 }, { id: 5 }], 'seq 3 (held by the snapshot) dropped, seq 5 applied');
  srv.send({ query_id: 'todos', seq: 5, inserted: [{ id: 55 }], deleted: [] });
  srv.send({ query_id: 'todos', seq: 6, inserted: [{ id: 6 }], deleted: [] });
  await waitFor(() => q.rows.length === 5, 'seq 6');
  t.notOk(q.rows.some((r) => r.id === 55), 'a seq already applied is ignored');

  // A gap asks for a snapshot again; a delta that comes before its answer waits for it.
  srv.send({ query_id: 'todos', seq: 8, inserted: [{ id: 8 }], deleted: [] });
  await waitFor(() => asked(2), 'a snapshot asked for at the gap');
  srv.send({ query_id: 'todos', seq: 9, inserted: [{ id: 9 }], deleted: [] });
  srv.send({ type: 'snapshot', query_id: 'todos', seq: 8, rows: [{ id: 7 }, { id: 8 }] });
  await waitFor(() => q.snapshots === 2 && q.rows.length === 3, 'the gap healed');
  t.same(q.rows, [{ id: 7 }, { id: 8 }, { id: 9 }]);

  // An overflow asks for a snapshot; one that comes while a snapshot is awaited and is newer
  // than it asks again.
  srv.send({ type: 'overflow', query_id: 'todos', seq: 10, fetch: true });
  await waitFor(() => asked(3), 'a snapshot asked for at the overflow');
  srv.send({ type: 'overflow', query_id: 'todos', seq: 11, fetch: true });
  srv.send({ type: 'snapshot', query_id: 'todos', seq: 10, rows: [{ id: 10 }] });
  await waitFor(() => asked(4), 'asked again for the later overflow');
  srv.send({ type: 'snapshot', query_id: 'todos', seq: 11, rows: [{ id: 11 }] });
  await waitFor(() => q.snapshots === 4, 'the second answer');
  t.same(q.rows, [{ id: 11 }]);
  t.equal(q.refetches, 0, 'never loaded through refetch');

  // A service with nothing stored to send (rows null): the caller's refetch loads instead.
  table = [{ id: 12 }];
  srv.send({ type: 'overflow', query_id: 'todos', seq: 12, fetch: true });
  await waitFor(() => asked(5), 'asked at the overflow');
  srv.send({ type: 'snapshot', query_id: 'todos', seq: null, rows: null });
  await waitFor(() => q.refetches === 1 && q.rows.length === 1 && q.rows[0].id === 12, 'refetched');
  srv.send({ query_id: 'todos', seq: 13, inserted: [{ id: 13 }], deleted: [] });
  await waitFor(() => q.rows.length === 2, 'deltas go on after it');
  t.same(q.rows, [{ id: 12 }, { id: 13 }]);
  q.close();
});

t.test('refused connections are retried with backoff until closed', async (t) => {
  const srv = await scriptedServer(t);
  srv.refuse = true;
  const errors: string[] = [];
  const q = new LiveQuery(
    'nope',
    { url: srv.url, fetch: (i, init) => fetch(i, init), anonKey: 'ANON', getToken: async () => null },
    { minDelayMs: 5, maxDelayMs: 20 },
  );
  q.on('error', (e) => errors.push(e.message));
  await waitFor(() => srv.attempts >= 3, 'three attempts');
  t.ok(errors.length >= 2);
  t.match(errors[0], /live query nope: connection/);
  srv.refuse = false;
  await waitFor(() => q.status === 'subscribed', 'subscribed once the server accepts');
  t.equal(srv.conns[0].token, 'ANON', 'signed out: the anon key is the token');
  q.close();
});

t.test('against a real plinth: the token in the subprotocols, 4001 at exp, a refreshed token sent on the socket', async (t) => {
  const app = await startApp(t);
  await app.db.sql.unsafe(`create table public.items (id int primary key);
    grant select on public.items to authenticated;
    select live.subscribe('items_live', 'select id from public.items');`);
  const key = new TextEncoder().encode(TEST_JWT_SECRET);
  const mint = (seconds: number) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ sub: '6f1c1c2e-0d5e-4c43-9a53-2d3a1d3c9f01', role: 'authenticated', aud: 'authenticated' })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuedAt(now)
      .setExpirationTime(now + seconds)
      .sign(key);
  };
  const expOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).exp as number;

  // Tokens that live 2 s: the socket is closed with 4001 at exp, and the client comes back with a fresh one.
  const issued: string[] = [];
  const errors: string[] = [];
  const short = new LiveQuery(
    'items_live',
    { url: app.url, fetch: (i, init) => fetch(i, init), anonKey: app.anonKey, getToken: async () => (issued.push(await mint(2)), issued.at(-1)!) },
    { minDelayMs: 10, maxDelayMs: 40 },
  );
  t.teardown(() => short.close());
  short.on('error', (e) => errors.push(e.message));
  await waitFor(() => short.status === 'subscribed', 'subscribed with a token in the subprotocols (JWT_SECRET is set: no credential would be 401)');
  await waitFor(() => errors.some((m) => m.includes('(4001)')), 'closed with 4001 at exp', 20_000);
  await waitFor(() => short.status === 'subscribed' && issued.length >= 2, 'reconnected with a fresh token', 20_000);
  t.pass('4001 at exp, then a reconnect with a fresh token');
  short.close();

  // A refreshed token sent on the socket keeps it open past the first token's exp.
  const first = await mint(2);
  let current = first;
  const closes: string[] = [];
  const kept = new LiveQuery(
    'items_live',
    { url: app.url, fetch: (i, init) => fetch(i, init), anonKey: app.anonKey, getToken: async () => current },
    { minDelayMs: 10, maxDelayMs: 40 },
  );
  t.teardown(() => kept.close());
  kept.on('error', (e) => closes.push(e.message));
  await waitFor(() => kept.status === 'subscribed', 'subscribed');
  const id = kept.clientId;
  current = await mint(3600);
  t.equal(await kept.reauthenticate(), true, 'the refreshed token sent');
  await waitFor(() => Date.now() > expOf(first) * 1000 + 1500, 'the first token to expire', 20_000);
  const got: unknown[] = [];
  kept.on('broadcast', (p) => got.push(p));
  t.equal(kept.broadcast({ still: 'here' }), true);
  await waitFor(() => got.length === 1, 'the socket still served');
  t.equal(kept.clientId, id, 'the same socket, never closed');
  t.same(closes, [], 'no close');
  kept.close();
});

t.test('createClient: a signed-in live query outlives its access tokens (TOKEN_REFRESHED sends the new one)', async (t) => {
  const app = await startApp(t, { env: { ACCESS_TOKEN_TTL: '4', AUTH_RATE_LIMIT: '0' } });
  await app.db.sql.unsafe(`create table public.items (id int primary key);
    grant select on public.items to authenticated;
    select live.subscribe('items_live', 'select id from public.items');`);
  const c = createClient(app.url, app.anonKey, { auth: { refreshLeadSeconds: 2 } });
  const up = await c.auth.signUp({ email: `live-${Date.now()}@example.com`, password: 'correct horse battery' });
  t.equal(up.error, null, 'signed up and in');
  const events: string[] = [];
  c.auth.onAuthStateChange((e) => void events.push(e));
  const firstExp = up.data!.session!.expires_at;
  const q = c.live('items_live');
  t.teardown(() => q.close());
  const errors: string[] = [];
  q.on('error', (e) => errors.push(e.message));
  await waitFor(() => q.status === 'subscribed', 'subscribed');
  const id = q.clientId;
  await waitFor(() => Date.now() > (firstExp + 3) * 1000 && events.filter((e) => e === 'TOKEN_REFRESHED').length >= 2, 'two refreshes, past the first token', 30_000);
  const got: unknown[] = [];
  q.on('broadcast', (p) => got.push(p));
  t.equal(q.broadcast({ still: 'here' }), true);
  await waitFor(() => got.length === 1, 'the socket still served');
  t.equal(q.clientId, id, 'the same socket all along');
  t.same(errors, [], 'never closed');
  await c.auth.signOut();
});
