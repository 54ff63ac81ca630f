/**
 * A lane connection (src/core/lane/client.ts) on its own, as a lane's login role, through a
 * TCP proxy that reads what it sends: each request is one unit with one Sync, the claims and
 * the work in one implicit transaction; the claims statement failing skips the work; claims
 * end with their request; statements that are gone or changed are parsed again and the
 * request runs with its claims; behind a pooler nothing is named and no `options` startup
 * parameter goes out; values go out and rows come back typed as the `postgres` driver does.
 */
import t from 'tap';
import net from 'node:net';
import { LaneConnection, type LaneConnectOptions } from '../../src/core/lane/client.ts';
import { laneSql as c, parseArray } from '../../src/core/lane/sql.ts';
import { createTestDatabase } from '../helpers/database.ts';

const userId = '22222222-2222-4222-8222-222222222222';
const claims = JSON.stringify({ role: 'authenticated', sub: userId });

const tdb = await createTestDatabase(t);
await tdb.sql.unsafe(`
  create table public.marks (id int primary key, who uuid default auth.uid());
  create table public.shapes (a int);
  insert into public.shapes values (1);
  grant select, insert on public.marks to authenticated;
  grant select on public.shapes to authenticated;
  create function public.deallocate_all() returns int language plpgsql as $f$ begin execute 'deallocate all'; return 1; end $f$;
  grant execute on function public.deallocate_all() to authenticated;
`);

/** What the proxy saw the client send: the startup packet's parameters, and the type and statement name of each message after it. */
interface Seen {
  startup: Record<string, string>;
  messages: Array<{ type: string; name?: string }>;
}

async function proxy(): Promise<{ port: number; seen: Seen[]; close(): void }> {
  const upstream = new URL(tdb.url);
  const seen: Seen[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const s: Seen = { startup: {}, messages: [] };
    seen.push(s);
    const up = net.connect(Number(upstream.port), upstream.hostname);
    sockets.add(client).add(up);
    let buf = Buffer.alloc(0);
    let started = false;
    client.on('data', (d: Buffer) => {
      up.write(d);
      buf = Buffer.concat([buf, d]);
      for (;;) {
        if (!started) {
          if (buf.length < 4 || buf.length < buf.readUInt32BE(0)) return;
          const len = buf.readUInt32BE(0);
          const parts = buf.subarray(8, len - 1).toString().split('\0');
          for (let i = 0; i + 1 < parts.length; i += 2) s.startup[parts[i]] = parts[i + 1];
          buf = buf.subarray(len);
          started = true;
          continue;
        }
        if (buf.length < 5 || buf.length < 1 + buf.readUInt32BE(1)) return;
        const type = String.fromCharCode(buf[0]);
        const len = 1 + buf.readUInt32BE(1);
        const m: { type: string; name?: string } = { type };
        if (type === 'P') m.name = buf.toString('utf8', 5, buf.indexOf(0, 5));
        if (type === 'B') {
          const portalEnd = buf.indexOf(0, 5);
          m.name = buf.toString('utf8', portalEnd + 1, buf.indexOf(0, portalEnd + 1));
        }
        s.messages.push(m);
        buf = buf.subarray(len);
      }
    });
    up.on('data', (d: Buffer) => client.write(d));
    const drop = () => {
      client.destroy();
      up.destroy();
    };
    client.on('close', drop).on('error', drop);
    up.on('close', drop).on('error', drop);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    seen,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

const p = await proxy();
t.teardown(() => p.close());

async function lane(pooler = false): Promise<LaneConnection> {
  const u = new URL(tdb.url);
  u.username = 'plinth_authenticated';
  u.port = String(p.port);
  const o: LaneConnectOptions = { url: u.toString(), role: 'authenticated', applicationName: 'lane-test', tls: 'disable', connectTimeoutMs: 5000, pooler };
  const conn = await LaneConnection.open(o);
  t.teardown(() => conn.end());
  return conn;
}

const code = (x: Promise<unknown>) => x.then(() => null, (e: Error & { code?: string }) => e.code ?? e.message);
const count = async (id: number) => (await tdb.sql`select count(*)::int as n from public.marks where id = ${id}`)[0].n as number;

t.test('one unit per request: claims and work, one Sync, the claims only for their request', async (t) => {
  const conn = await lane();
  const seen = p.seen[p.seen.length - 1];
  const syncsBefore = seen.messages.filter((m) => m.type === 'S').length;
  const [row] = await conn.run(claims, null, c`select current_user as role, auth.uid() as uid, ${1}::int as one`);
  t.same(row, { role: 'authenticated', uid: userId, one: 1 }, 'the work runs as the role, with the claims');
  const many = await Promise.all(
    Array.from({ length: 40 }, (_, i) => {
      const sub = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      return conn.run(JSON.stringify({ role: 'authenticated', sub }), null, c`select auth.uid() as uid`).then((r) => r[0].uid === sub);
    }),
  );
  t.ok(many.every(Boolean), 'a pipelined burst: each request with its own claims');
  t.equal(seen.messages.filter((m) => m.type === 'S').length - syncsBefore, 41, 'one Sync per request');
  t.notOk(seen.messages.some((m) => m.type === 'Q'), 'never the simple protocol');

  await conn.run(claims, null, c`insert into public.marks (id) values (${1})`);
  const [{ who }] = await tdb.sql`select who from public.marks where id = 1`;
  t.equal(who, userId, 'a write sees the claims (a default of auth.uid())');

  const [after] = await conn.run('{"role":"authenticated"}', null, c`select auth.uid() as uid`);
  t.equal(after.uid, null, 'the next request on the connection sees none of the previous claims');
});

t.test('the claims statement fails: the work is skipped, with the claims\' error; the connection goes on', async (t) => {
  const conn = await lane();
  const bad = '{"role":"authenticated","x":"\u0000"}';
  await conn.run(claims, null, c`insert into public.marks (id) values (${2}) on conflict do nothing returning id`).then(() =>
    tdb.sql`delete from public.marks where id = 2`,
  );
  t.equal(await code(conn.run(bad, null, c`insert into public.marks (id) values (${2})`)), '22021', 'a prepared work: the claims\' error');
  t.equal(await code(conn.run(bad, null, c`insert into public.marks (id) values (${3}) returning id`)), '22021', 'a new work: the same');
  t.same([await count(2), await count(3)], [0, 0], 'nothing written');
  const [{ uid }] = await conn.run(claims, null, c`select auth.uid() as uid`);
  t.equal(uid, userId, 'the next request runs with its claims');
  t.equal(await code(conn.run(claims, null, c`selec 1`)), '42601', 'a work that does not parse: its own error');
  t.equal(await code(conn.run(claims, null, c`selec 1`)), '42601', 'and again (it is parsed again, not taken as prepared)');
  const [{ two }] = await conn.run(claims, null, c`select 2 as two`);
  t.equal(two, 2);
});

t.test('the statement timeout of the claims statement holds for its work only', async (t) => {
  const conn = await lane();
  t.equal(await code(conn.run(claims, '50ms', c`select pg_sleep(${2})`)), '57014', 'cancelled by the timeout it set');
  const [{ timeout }] = await conn.run(claims, null, c`select current_setting('statement_timeout') as timeout`);
  t.not(timeout, '50ms', 'and not for the next request');
});

t.test('statements gone (DEALLOCATE ALL) or changed (DDL): parsed again, run with their claims', async (t) => {
  const conn = await lane();
  const whoami = () => conn.run(claims, null, c`select auth.uid() as uid`).then((r) => r[0].uid);
  t.equal(await whoami(), userId);
  for (let i = 0; i < 3; i++) {
    await conn.run(claims, null, c`select public.deallocate_all()`);
    t.equal(await whoami(), userId, `round ${i + 1}: after a DEALLOCATE ALL the next request runs, with its claims`);
  }
  const shapes = () => conn.run(claims, null, c`select *, auth.uid() as uid from public.shapes where a = ${1}`);
  t.same([...(await shapes())], [{ a: 1, uid: userId }]);
  await tdb.sql`alter table public.shapes add column b int default 2`;
  t.same([...(await shapes())], [{ a: 1, b: 2, uid: userId }], 'after DDL: the new shape, with the claims');
});

t.test('behind a pooler: unnamed statements only, no options startup parameter', async (t) => {
  const conn = await lane(true);
  const seen = p.seen[p.seen.length - 1];
  for (let i = 0; i < 3; i++) {
    const [{ uid, role }] = await conn.run(claims, null, c`select auth.uid() as uid, current_user as role, ${i}::int as i`);
    t.same([uid, role], [userId, 'authenticated'], 'runs as the role (the login role\'s own setting), with the claims');
  }
  t.notOk('options' in seen.startup, 'no options startup parameter');
  const named = seen.messages.filter((m) => (m.type === 'P' || m.type === 'B') && m.name !== '');
  t.same(named, [], 'every Parse and Bind names the unnamed statement');
  const plain = await lane();
  const seenPlain = p.seen[p.seen.length - 1];
  t.match(seenPlain.startup.options, /role=authenticated/, 'without a pooler the session role goes as a startup option');
  await plain.run(claims, null, c`select 1 as one`);
});

t.test('values out and rows in, typed as the postgres driver types them', async (t) => {
  const conn = await lane();
  const when = new Date('2024-05-06T07:08:09.123Z');
  const [row] = await conn.run(
    claims,
    null,
    c`select ${42}::int as i, ${'9007199254740993'}::int8 as big, ${'1.50'}::numeric as num, ${true} as yes, ${false}::bool as no,
             ${{ a: [1, 'x'] }}::jsonb as doc, ${when} as at, ${Buffer.from([0, 255])} as bytes, ${null}::text as nothing,
             ${[1, 2, null]}::int[] as ints, ${['a b', 'q"uote', 'back\\slash', null]}::text[] as texts,
             ${[[1, 2], [3, 4]]}::int[] as nested, '2024-01-02'::date as day, 1.5::float8 as f, ${userId}::uuid as id,
             array[${userId}::uuid] as ids, interval '1 day' as span`,
  );
  t.strictSame(row, {
    i: 42,
    big: '9007199254740993',
    num: '1.50',
    yes: true,
    no: false,
    doc: { a: [1, 'x'] },
    at: when,
    bytes: Buffer.from([0, 255]),
    nothing: null,
    ints: [1, 2, null],
    texts: ['a b', 'q"uote', 'back\\slash', null],
    nested: [[1, 2], [3, 4]],
    day: new Date('2024-01-02'),
    f: 1.5,
    id: userId,
    ids: [userId],
    span: '1 day',
  });
  const rows = await conn.run(claims, null, c`select g from generate_series(1, 3) g`);
  t.strictSame([rows.command, rows.count, rows.length], ['SELECT', 3, 3], 'the command tag');
  t.same(parseArray('[0:1]={"{",NULL}', undefined), ['{', null], 'a literal with bounds, a brace in quotes');
});

t.test('a lost connection fails what it had in flight, with a connection error', async (t) => {
  const conn = await lane();
  const slow = code(conn.run(claims, null, c`select pg_sleep(5)`));
  for (let i = 0; i < 100 && (await tdb.sql`select 1 from pg_stat_activity where query like 'select pg_sleep(5)%' and state = 'active'`).length === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await tdb.sql`select pg_terminate_backend(pid) from pg_stat_activity where query like 'select pg_sleep(5)%' and state = 'active'`;
  t.match(await slow, /^(57P01|CONNECTION_CLOSED)$/, 'the request fails');
  t.equal(await code(conn.run(claims, null, c`select 1`)), 'CONNECTION_CLOSED', 'the connection takes no more requests');
  t.ok(conn.closed);
});
