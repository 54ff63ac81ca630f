/**
 * The postgres driver's repairs (patches/postgres+3.4.9.patch, applied by patch-package at
 * install; patches/README.md names the upstream issue each waits for): each case is one a
 * 3.4.9 driver without them fails, deterministically, on a real connection whose socket this
 * test closes at the moment that matters. The owner pool, the LISTEN connection and the
 * transaction pools run on this driver; the request lanes do not (src/core/lane/).
 */
import t from 'tap';
import net from 'node:net';
import postgres from 'postgres';
import { serverUrl } from '../helpers/database.ts';

const url = serverUrl();
const { hostname, port } = new URL(url);

/** A pool of one connection whose sockets the test can reach (the last one made). */
function pool(onWrite?: (socket: net.Socket, chunk: Buffer) => void) {
  const sockets: net.Socket[] = [];
  const sql = postgres(url, {
    max: 1,
    connect_timeout: 3,
    onnotice: () => {},
    socket: () => {
      const s = new net.Socket();
      if (onWrite) {
        const write = s._write.bind(s);
        s._write = (chunk: Buffer, enc: BufferEncoding, cb: (e?: Error | null) => void) => {
          write(chunk, enc, cb);
          onWrite(s, chunk);
        };
      }
      sockets.push(s.connect(Number(port), hostname));
      return s;
    },
  } as postgres.Options<Record<string, never>>);
  return { sql, last: () => sockets[sockets.length - 1], count: () => sockets.length };
}

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const outcome = (p: Promise<unknown>) =>
  p.then(
    () => 'ran',
    (e: { code?: string }) => e.code ?? 'failed',
  );

// Repair 1 (porsager/postgres#1209, #1215): teardown forgot neither the cancelled write nor its bytes.
t.test('a socket that closes with a write pending: that query fails, the next one runs', async (t) => {
  const { sql, last } = pool();
  t.teardown(() => sql.end({ timeout: 1 }));
  await sql`select 1`;
  // Sent from an immediate, the query is batched behind the next one; the socket's 'close'
  // comes first (this loop turn's close phase), as when a backend dies under load.
  const lost = await new Promise<string>((resolve) =>
    setImmediate(() => {
      const q = outcome(sql`select 2 as two`.execute());
      last().destroy();
      resolve(q);
    }),
  );
  t.equal(lost, 'CONNECTION_CLOSED', 'the query in flight fails');
  // Without the repair the connection never writes again: every reconnect ends in CONNECT_TIMEOUT.
  const [{ three }] = await sql`select 3 as three`;
  t.equal(three, 3, 'the connection reconnects and writes again');
});

// Repair 3 (porsager/postgres#1142, #1215): what was in flight at the close stayed in flight on the next connection.
t.test('a query sent between a socket error and its close fails; the connection comes back', async (t) => {
  const { sql, last } = pool();
  t.teardown(() => sql.end({ timeout: 1 }));
  await sql`select 1`;
  const socket = last();
  let late: Promise<string> | null = null;
  // Runs after the driver's own 'error' listener, while the pool still holds the connection.
  socket.once('error', () => {
    late = outcome(sql`select 2 as two`.execute());
  });
  socket.destroy(new Error('connection lost (test)'));
  await until(() => late !== null);
  const timer = (ms: number) => new Promise<string>((resolve) => setTimeout(() => resolve('unsettled'), ms).unref());
  t.equal(await Promise.race([late!, timer(10_000)]), 'CONNECTION_CLOSED', 'the late query fails');
  const next = sql`select 3 as three`.then((r) => String(r[0].three), (e: { code?: string }) => e.code ?? 'failed');
  t.equal(await Promise.race([next, timer(10_000)]), '3', 'the connection reconnects and answers');
});

// Repair 2 (porsager/postgres#1208, fixed by #1209): a write after the close threw from an immediate.
t.test('a reserved connection whose socket closed: its next query fails, the process goes on', async (t) => {
  const { sql, last } = pool();
  t.teardown(() => sql.end({ timeout: 1 }));
  const reserved = await sql.reserve();
  await reserved`select 1`;
  const closed = new Promise((resolve) => last().once('close', resolve));
  last().destroy();
  await closed;
  // Without the repair the batched write throws a TypeError from an immediate (the process ends).
  t.equal(await outcome(reserved`select 2`.execute()), 'CONNECTION_CLOSED', 'the query fails with CONNECTION_CLOSED');
  reserved.release();
});

// Repair 4 (porsager/postgres#1192, #1205): the array-type query's failure was never observed.
t.test('a connection lost while it fetches the array types: no unhandled rejection, the query runs', async (t) => {
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  t.teardown(() => process.off('unhandledRejection', onUnhandled));
  let cut = false;
  const { sql, count } = pool((socket, chunk) => {
    // The first connection's socket fails right after the driver sends its array-type query.
    if (!cut && chunk.includes('typarray')) {
      cut = true;
      setImmediate(() => socket.destroy(new Error('connection lost (test)')));
    }
  });
  t.teardown(() => sql.end({ timeout: 1 }));
  // The query that opened the connection fails with it (the driver's choice), once.
  t.equal(await outcome(sql`select 1 as one`.execute()), 'failed', 'the query that opened the lost connection fails');
  t.ok(cut, 'the connection was cut during its type query');
  const [{ one }] = await sql`select 1 as one`;
  t.equal(one, 1, 'the next query runs on a new connection');
  t.ok(count() >= 2);
  const [{ a }] = await sql`select ${[1, 2]}::int[] as a`;
  t.same(a, [1, 2], 'array types were fetched again');
  // Let any rejection left behind surface before counting.
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.same(unhandled, [], 'no rejection was left unhandled');
});

/** A pool of two connections whose sockets wait for `gate()` before they connect (after the first). */
function gatedPool(gate: (n: number) => Promise<void>, fail?: (n: number) => boolean) {
  const sockets: net.Socket[] = [];
  const sql = postgres(url, {
    max: 2,
    connect_timeout: 3,
    onnotice: () => {},
    socket: async () => {
      const n = sockets.length;
      const s = new net.Socket();
      sockets.push(s);
      await gate(n);
      if (fail?.(n)) setImmediate(() => s.destroy(new Error('connection refused (test)')));
      else s.connect(Number(port), hostname);
      return s;
    },
  } as postgres.Options<Record<string, never>>);
  return { sql, sockets };
}

const within = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<'unsettled'>((resolve) => setTimeout(() => resolve('unsettled'), ms).unref())]);

// Repair 5: a reservation handed alone to a reconnecting connection was dropped once it was ready.
t.test('a reservation made while an idle connection closes: it arrives', async (t) => {
  let firstClosed: Promise<void> = Promise.resolve();
  const { sql, sockets } = gatedPool((n) => (n === 0 ? Promise.resolve() : firstClosed));
  t.teardown(() => sql.end({ timeout: 1 }));
  await sql`select 1`;
  firstClosed = new Promise((resolve) => sockets[0].once('close', () => resolve()));
  // The idle connection closes (the budget takes it back); the reservation comes before its
  // close: a second connection opens for it, and the closed one opens again for it too. Before
  // the repair both became idle and the reservation waited for ever.
  t.ok((sql as unknown as { evictIdle(): boolean }).evictIdle(), 'the idle connection is closing');
  const reserved = within(sql.reserve(), 10_000);
  const r = await reserved;
  t.not(r, 'unsettled', 'the reservation arrives');
  if (r === 'unsettled') return;
  const [{ one }] = await r`select 1 as one`;
  t.equal(one, 1, 'and runs');
  r.release();
});

// Repair 6: a reservation that failed stayed queued, and the next connection to open was handed to it for good.
t.test('a reservation whose connection fails: it fails, and no connection is lost to it', async (t) => {
  const { sql } = gatedPool(() => Promise.resolve(), (n) => n === 0);
  t.teardown(() => sql.end({ timeout: 1 }));
  // The connection opened for it fails: the reservation fails with it.
  t.equal(await within(outcome(sql.reserve()), 10_000), 'failed', 'the reservation fails with its connection');
  // Every connection of the pool opens again and serves queries: none is held by the failed reservation.
  const a = await within(sql.reserve(), 10_000);
  const b = await within(sql.reserve(), 10_000);
  t.not(a, 'unsettled', 'a first reservation arrives');
  t.not(b, 'unsettled', 'a second one arrives: the pool has both its connections');
  if (a !== 'unsettled') a.release();
  if (b !== 'unsettled') b.release();
});

// Repair 5 again, from the other side: a connection that closed took a queued reservation as its
// initial query, which the connection dropped once open (seen under storage upserts and reads).
t.test('a reservation queued while another connection closes: it is served', async (t) => {
  let gate: () => void = () => {};
  const opened = new Promise<void>((resolve) => (gate = resolve));
  const sockets: net.Socket[] = [];
  let calls = 0;
  const sql = postgres(url, {
    max: 2,
    connect_timeout: 3,
    onnotice: () => {},
    // The pool's second connection waits for the test before it connects.
    socket: async () => {
      if (++calls === 2) await opened;
      const s = new net.Socket();
      sockets.push(s.connect(Number(port), hostname));
      return s;
    },
  } as postgres.Options<Record<string, never>>);
  t.teardown(() => sql.end({ timeout: 1 }));
  const held = await sql.reserve();
  await held`select 1`;
  // The first connection held: the next reservation waits in the queue and opens the second one.
  const reservation = sql.reserve();
  reservation.catch(() => {});
  await until(() => calls === 2);
  // The first connection closes meanwhile, then the second one opens.
  const closed = new Promise((resolve) => sockets[0].once('close', resolve));
  sockets[0].destroy();
  await closed;
  gate();
  let timer: NodeJS.Timeout | undefined;
  const served = await Promise.race([
    reservation.then((r) => (r.release(), 'served')),
    new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still waiting'), 5000))),
  ]);
  clearTimeout(timer);
  t.equal(served, 'served', 'the reservation gets a connection');
});
