/**
 * The lane socket (src/core/pipeline.ts) on its own, under a bare driver as a lane's login
 * role: a query with its prelude runs with the claims, in one transaction with them; a query
 * without one (extended or simple protocol) is refused before it runs, with 08006, and
 * writes nothing; the connection goes on after each; a first unit whose own Parse fails (and
 * so skips the claims statement's Parse) leaves the claims statement parsed again next time.
 */
import t from 'tap';
import postgres from 'postgres';
import { PipelineSocket, claimsPrelude } from '../../src/core/pipeline.ts';
import { createTestDatabase } from '../helpers/database.ts';

const userId = '22222222-2222-4222-8222-222222222222';
const claims = JSON.stringify({ role: 'authenticated', sub: userId });

const tdb = await createTestDatabase(t);
await tdb.sql.unsafe(`
  create table public.marks (id int primary key, who uuid default auth.uid());
  grant select, insert on public.marks to authenticated;
`);

/** A driver over the lane socket, as plinth_authenticated with the session role authenticated. */
function lane(): postgres.Sql {
  const u = new URL(tdb.url);
  const sql = postgres({
    host: u.hostname,
    port: Number(u.port),
    database: u.pathname.slice(1),
    user: 'plinth_authenticated',
    max: 1,
    prepare: true,
    onnotice: () => {},
    connection: { role: 'authenticated' },
    socket: () => new PipelineSocket().connect(Number(u.port), u.hostname),
  } as postgres.Options<Record<string, never>>) as unknown as postgres.Sql;
  t.teardown(() => sql.end({ timeout: 1 }));
  return sql;
}

type Pending = postgres.PendingQuery<postgres.Row[]> & { options: { prelude?: Buffer; simple?: boolean } };

/** What withContext does: the claims as the query's prelude, the extended protocol. */
function withClaims(q: postgres.PendingQuery<postgres.Row[]>, timeout: string | null = null): Promise<postgres.RowList<postgres.Row[]>> {
  const p = q as Pending;
  p.options.prelude = claimsPrelude(claims, timeout);
  p.options.simple = false;
  return p.execute();
}

const code = (p: Promise<unknown>) => p.then(() => null, (e: { code?: string }) => e.code ?? String(e));
const count = async (id: number) => (await tdb.sql`select count(*)::int as n from public.marks where id = ${id}`)[0].n as number;

t.test('with its prelude a query runs with the claims; without, it is refused and writes nothing', async (t) => {
  const sql = lane();
  const [row] = await withClaims(sql`select current_user as role, auth.uid() as uid, ${1}::int as one`);
  t.same(row, { role: 'authenticated', uid: userId, one: 1 }, 'the claims, set in the same transaction');

  t.equal(await code(sql`insert into public.marks (id) values (${1})`), '08006', 'extended protocol without claims: refused');
  t.equal(await count(1), 0, 'and not run');
  t.equal(await code(sql.unsafe('insert into public.marks (id) values (2)')), '08006', 'simple protocol: refused');
  t.equal(await count(2), 0, 'and not run');

  await withClaims(sql`insert into public.marks (id) values (${3})`);
  const [{ who }] = await tdb.sql`select who from public.marks where id = 3`;
  t.equal(who, userId, 'the connection goes on: the next query with its prelude runs, with its claims');

  // Claims are local to their transaction: a query right after, refused, sets nothing for the next.
  await code(sql`select 1`);
  const [{ uid }] = await withClaims(sql`select auth.uid() as uid, ${2}::int as two`);
  t.equal(uid, userId);
});

t.test('a burst of queries with and without preludes on one connection', async (t) => {
  const sql = lane();
  const outcomes = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      i % 3 === 0
        ? code(sql`select auth.uid() as uid, ${i}::int as i`)
        : withClaims(sql`select auth.uid() as uid, ${i}::int as i`).then((r) => r[0].uid as string, () => 'failed'),
    ),
  );
  t.ok(
    outcomes.every((o, i) => (i % 3 === 0 ? o === '08006' : o === userId)),
    'each refused or run with its claims, in step',
    { outcomes },
  );
});

t.test('a first unit that fails at its own Parse: the claims statement is parsed again after', async (t) => {
  const sql = lane();
  // No parameters, prepared: the work's Parse, the claims statement's Parse and both Binds go
  // in one unit; the work's Parse fails, PostgreSQL skips the rest.
  const bad = sql.unsafe('selec 1', [], { prepare: true }) as postgres.PendingQuery<postgres.Row[]>;
  t.equal(await code(withClaims(bad)), '42601', 'the syntax error, as the query\'s');
  const [{ uid }] = await withClaims(sql`select auth.uid() as uid, ${1}::int as one`);
  t.equal(uid, userId, 'the next query runs with its claims');
});

t.test('the statement timeout in the prelude applies to the work', async (t) => {
  const sql = lane();
  t.equal(await code(withClaims(sql`select pg_sleep(${2})`, '50ms')), '57014', 'cancelled by the timeout the prelude set');
  const [{ timeout }] = await withClaims(sql`select current_setting('statement_timeout') as timeout, ${1}::int as one`);
  t.equal(timeout, '0', 'and only for its own transaction');
});
