/**
 * The request lanes over TLS to the database: one Sync per request as without TLS (the lane
 * client, node-postgres, negotiates TLS), claims on every
 * statement, a lane killed mid-burst fails closed, and the sslmode values mean what they
 * mean to libpq; the owner and transaction pools negotiate TLS inside the connection budget.
 * The database is the shared server behind a TLS-terminating proxy that
 * answers PostgreSQL's SSLRequest (a self-signed certificate made here with openssl).
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { Db, type RequestContext } from '../../src/core/db.ts';
import { createLogger } from '../../src/core/log.ts';
import { createTestDatabase } from '../helpers/database.ts';

const userId = '22222222-2222-4222-8222-222222222222';
const user: RequestContext = {
  role: 'authenticated',
  claims: JSON.stringify({ role: 'authenticated', sub: userId }),
  claimsObject: { role: 'authenticated', sub: userId },
};

interface TlsProxy {
  port: number;
  /** Connections that completed a TLS handshake, and those that stayed plaintext. */
  secured: number;
  plain: number;
  close(): Promise<void>;
}

/** PostgreSQL with TLS, as a client sees it: SSLRequest answered 'S', then TLS to a plain upstream. */
async function startTlsProxy(upstreamPort: number, key: Buffer, cert: Buffer): Promise<TlsProxy> {
  const sockets = new Set<net.Socket>();
  const state = { secured: 0, plain: 0 };
  const server = net.createServer((client) => {
    sockets.add(client);
    client.once('data', (first: Buffer) => {
      const upstream = net.connect(upstreamPort, '127.0.0.1');
      sockets.add(upstream);
      const drop = () => {
        client.destroy();
        upstream.destroy();
      };
      upstream.on('error', drop).on('close', drop);
      client.on('error', drop).on('close', drop);
      const isSslRequest = first.length === 8 && first.readUInt32BE(4) === 80877103;
      if (!isSslRequest) {
        state.plain++;
        upstream.write(first);
        client.pipe(upstream).pipe(client);
        return;
      }
      const secure = new tls.TLSSocket(client, { isServer: true, key, cert });
      secure.on('secure', () => state.secured++);
      secure.on('error', drop).on('close', drop);
      secure.pipe(upstream).pipe(secure);
      client.write('S');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    get secured() {
      return state.secured;
    },
    get plain() {
      return state.plain;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

t.test('request lanes over TLS', async (t) => {
  const tdb = await createTestDatabase(t);
  await tdb.sql.unsafe(`
    create table public.tls_notes (id int primary key, owner uuid);
    alter table public.tls_notes enable row level security;
    grant select on public.tls_notes to authenticated;
    create policy own on public.tls_notes for select using (owner = auth.uid());
    insert into public.tls_notes values (1, '${userId}'), (2, gen_random_uuid());
  `);
  const dir = mkdtempSync(join(tmpdir(), 'plinth-tls-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=localhost',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
  ], { stdio: 'ignore' });
  const upstream = new URL(tdb.url);
  const proxy = await startTlsProxy(Number(upstream.port), readFileSync(join(dir, 'key.pem')), readFileSync(join(dir, 'cert.pem')));
  t.teardown(() => proxy.close());
  const through = (port: number, mode: string) => {
    const u = new URL(tdb.url);
    u.port = String(port);
    u.searchParams.set('sslmode', mode);
    return u.toString();
  };
  const open = (url: string) => {
    const db = new Db({ url, poolSize: 2, log: createLogger('silent') });
    t.teardown(() => db.end({ timeout: 1 }));
    return db;
  };
  const outcome = (db: Db) =>
    db.withContext(user, (c) => c`select auth.uid() as uid`).then(
      (r) => r[0].uid as string,
      (e: Error) => e.message,
    );

  await t.test('sslmode=require: the lanes speak TLS, with the claims, one request at a time and in bursts', async (t) => {
    const db = open(through(proxy.port, 'require'));
    const before = proxy.secured;
    const rows = await db.withContext(user, (c) => c`select id, current_user as who, auth.uid() as uid from public.tls_notes`);
    t.same([...rows], [{ id: 1, who: 'authenticated', uid: userId }], 'runs as the role, with the claims, under RLS');
    t.ok(proxy.secured > before, 'the lane connection completed a TLS handshake');
    const many = await Promise.all(Array.from({ length: 40 }, () => outcome(db)));
    t.ok(many.every((u) => u === userId), 'a pipelined burst over TLS: every request with its claims');

    // A prepared statement whose result changes after DDL: the lane parses it again and runs
    // the request again, its claims with it.
    await tdb.sql`create table public.tls_shapes (a int)`;
    await tdb.sql`grant select on public.tls_shapes to authenticated`;
    await tdb.sql`insert into public.tls_shapes values (1)`;
    const shapes = () => db.withContext(user, (c) => c`select *, auth.uid() as uid from public.tls_shapes where a = ${1}`);
    t.same([...(await shapes())], [{ a: 1, uid: userId }]);
    await tdb.sql`alter table public.tls_shapes add column b int default 2`;
    t.same([...(await shapes())], [{ a: 1, b: 2, uid: userId }], 'after DDL over TLS: the new shape, with the claims');

    // The lanes' backends killed mid-burst: every request settles, and none runs without its claims.
    const burst = Array.from({ length: 30 }, () => outcome(db));
    await tdb.sql`select pg_terminate_backend(pid) from pg_stat_activity
      where usename = 'plinth_authenticated' and datname = current_database()`;
    const results = await Promise.all(burst);
    t.ok(
      results.every((r) => r === userId || !/^[0-9a-f-]{36}$/.test(r)),
      'after a kill over TLS: each request failed or ran with its own claims',
    );
  });

  await t.test('sslmode=require: the owner pool and a transaction pool speak TLS inside the budget', async (t) => {
    const db = new Db({ url: through(proxy.port, 'require'), poolSize: 1, idleMs: 200, timeoutMs: 5000, log: createLogger('silent') });
    t.teardown(() => db.end({ timeout: 1 }));
    const before = proxy.secured;
    const [row] = await db.sql`select ssl from pg_catalog.pg_stat_ssl where pid = pg_catalog.pg_backend_pid()`;
    t.equal(row.ssl, false, 'PostgreSQL sees the proxy in plaintext (the proxy ends the TLS)');
    t.ok(proxy.secured > before, 'the owner pool connection completed a TLS handshake');
    t.equal(db.budget.inUse, 1, 'it holds the one unit of the budget');
    // The budget is spent: the request takes the owner's idle connection back, then a batch-style
    // transaction takes the lane's; each closed TLS connection gives its unit back.
    t.equal(await outcome(db), userId, 'a request runs once the owner connection is closed for it');
    const tx = await db.transactionWithContext(user, async (c) => (await c`select auth.uid() as uid`)[0].uid as string);
    t.equal(tx, userId, 'a transaction over TLS, inside the budget of one');
    t.ok(db.budget.inUse <= 1, `never more than the budget: ${db.budget.inUse}`);
    const deadline = Date.now() + 10_000;
    while (db.budget.inUse > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    t.equal(db.budget.inUse, 0, 'once idle, every unit is back: no connection over TLS leaks one');
    const [again] = await db.sql`select 1 as one`;
    t.equal(again.one, 1, 'the owner pool connects again over TLS');
  });

  await t.test('sslmode=verify-full with a certificate no authority signed: the lane refuses to connect', async (t) => {
    const db = open(through(proxy.port, 'verify-full'));
    const r = await outcome(db);
    t.not(r, userId, 'no request runs');
    t.match(r, /certificate/i, 'the error names the certificate');
  });

  await t.test('a server that never answers the SSLRequest: the request fails, it does not wait for good', async (t) => {
    const held = new Set<net.Socket>();
    const silent = net.createServer((s) => held.add(s));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const db = new Db({ url: through((silent.address() as net.AddressInfo).port, 'require'), poolSize: 1, log: createLogger('silent') });
    const r = await outcome(db);
    t.match(r, /timed out negotiating TLS/, 'the negotiation times out');
    await db.end({ timeout: 1 });
    for (const s of held) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  await t.test('against a server without TLS: require fails, prefer goes on in plaintext', async (t) => {
    const plainPort = Number(upstream.port);
    const required = await outcome(open(through(plainPort, 'require')));
    t.match(required, /does not accept TLS/, 'require: a clear refusal');
    t.equal(await outcome(open(through(plainPort, 'prefer'))), userId, 'prefer: plaintext, with the claims');
  });
});
