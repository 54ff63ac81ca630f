/**
 * The request context (design.md): work runs as the request's role with its claims, set
 * in a statement before the work, in one transaction. anon gets 403 on an ungranted table
 * and never sees a row RLS hides; a failed statement leaves nothing behind.
 */
import t from 'tap';
import postgres from 'postgres';
import { Db, type RequestContext } from '../../src/core/db.ts';
import { createLogger } from '../../src/core/log.ts';
import { pgErrorToAppError } from '../../src/core/errors.ts';
import { createTestDatabase } from '../helpers/database.ts';

const anon: RequestContext = { role: 'anon', claims: '{"role":"anon"}', claimsObject: { role: 'anon' } };
const userId = '11111111-1111-4111-8111-111111111111';
const user: RequestContext = {
  role: 'authenticated',
  claims: JSON.stringify({ role: 'authenticated', sub: userId }),
  claimsObject: { role: 'authenticated', sub: userId },
};

t.test('withContext', async (t) => {
  const tdb = await createTestDatabase(t);
  await tdb.sql.unsafe(`
    create table public.secrets (id int primary key);
    insert into public.secrets values (1);
    create table public.notes (id int primary key, owner uuid, body text);
    alter table public.notes enable row level security;
    grant select, insert on public.notes to anon, authenticated;
    create policy own on public.notes for select using (owner = auth.uid());
    create policy ins on public.notes for insert with check (true);
    insert into public.notes values (1, '${userId}', 'mine'), (2, gen_random_uuid(), 'theirs');
  `);
  const db = new Db({ url: tdb.url, poolSize: 2, log: createLogger('silent') });
  t.teardown(() => db.end());

  const who = await db.withContext(user, (c) => c`select current_user as role, auth.uid() as uid, auth.role() as claim_role`);
  t.same([...who], [{ role: 'authenticated', uid: userId, claim_role: 'authenticated' }], 'the statement runs as the role, with the claims');

  const err = await db.withContext(anon, (c) => c`select * from public.secrets`).catch((e: unknown) => e);
  t.equal(pgErrorToAppError(err).status, 403, 'anon on an ungranted table: 403');
  t.equal(pgErrorToAppError(err).publicMessage, 'permission denied');

  const anonRows = await db.withContext(anon, (c) => c`select id from public.notes`);
  t.same([...anonRows], [], 'anon sees no row RLS hides');
  const userRows = await db.withContext(user, (c) => c`select id, body from public.notes order by id`);
  t.same([...userRows], [{ id: 1, body: 'mine' }], 'the user sees only its own rows');

  // The claims are local to the request's transaction: the next request on the lane without
  // a sub sees none of the previous one's.
  const [after] = await db.withContext(
    { role: 'authenticated', claims: '{"role":"authenticated"}', claimsObject: { role: 'authenticated' } },
    (c) => c`select auth.uid() as uid`,
  );
  t.equal(after.uid, null, 'claims do not leak to the next request on the lane');

  // A failed statement rolls back and the connection stays usable.
  await t.rejects(db.withContext(anon, (c) => c`insert into public.notes values (3, null, 'x'), (3, null, 'dup')`));
  const [{ n }] = await tdb.sql`select count(*)::int as n from public.notes where id = 3`;
  t.equal(n, 0, 'nothing half-written');
  const ok = await db.withContext(anon, (c) => c`select 1 as one`);
  t.equal(ok[0].one, 1, 'the connection is reusable after a failure');

  // Several statements in one transaction.
  const res = await db.transactionWithContext(user, async (c) => {
    await c`insert into public.notes values (10, ${userId}, 'a')`;
    const [r] = await c`select count(*)::int as n from public.notes`;
    return r.n as number;
  });
  t.equal(res, 2, 'transactionWithContext runs as the role for every statement');
  await t.rejects(
    db.transactionWithContext(user, async (c) => {
      await c`insert into public.notes values (11, ${userId}, 'b')`;
      await c`select * from public.secrets`;
    }),
  );
  const [{ m }] = await tdb.sql`select count(*)::int as m from public.notes where id = 11`;
  t.equal(m, 0, 'a failure rolls the whole transaction back');

  // Many concurrent contexts on a pool of two never mix roles up.
  const results = await Promise.all(
    Array.from({ length: 40 }, (_, i) => db.withContext(i % 2 ? user : anon, (c) => c`select current_user as r`)),
  );
  t.ok(results.every((r, i) => r[0].r === (i % 2 ? 'authenticated' : 'anon')), 'pipelined contexts stay separate');

  // A prepared statement whose result changes after DDL: the lane parses it again and runs
  // the request again, its claims with it.
  await tdb.sql`create table public.shapes (a int)`;
  await tdb.sql`grant select on public.shapes to authenticated`;
  await tdb.sql`insert into public.shapes values (1)`;
  const shapes = () => db.withContext(user, (c) => c`select *, auth.uid() as uid from public.shapes where a = ${1}`);
  t.same([...(await shapes())], [{ a: 1, uid: userId }]);
  await tdb.sql`alter table public.shapes add column b int default 2`;
  t.same([...(await shapes())], [{ a: 1, b: 2, uid: userId }], 'after DDL: the new shape, with the claims');

  // A lane whose backend is killed mid-stream, three times: no request runs without its
  // claims, and every request settles (a lane killed while the next request was being
  // written once never wrote again). Each request is bounded so that a hang fails here
  // instead of stalling the file.
  for (let round = 0; round < 3; round++) {
    const killer = tdb.sql`select pg_terminate_backend(pid) from pg_stat_activity
      where usename = 'plinth_authenticated' and datname = current_database()`;
    const timers: NodeJS.Timeout[] = [];
    const bounded = <T,>(p: Promise<T>, dflt: T) =>
      Promise.race([p, new Promise<T>((resolve) => timers.push(setTimeout(() => resolve(dflt), 15_000)))]);
    const burst = Array.from({ length: 30 }, () =>
      bounded(
        db.withContext(user, (c) => c`select auth.uid() as uid, ${1}::int as one`).then(
          (r) => r[0].uid as string,
          () => 'failed',
        ),
        'unsettled',
      ),
    );
    await killer;
    const outcomes = await Promise.all(burst);
    timers.forEach(clearTimeout);
    t.ok(
      outcomes.every((o) => o === userId || o === 'failed'),
      `round ${round + 1}: every request settled, failed or with its own claims`,
      { outcomes: outcomes.filter((o) => o !== userId) },
    );
  }
  // A kill may land after its burst settled (an idle lane's close comes later): a request
  // meeting that close fails; the lane then reconnects and answers.
  let again: unknown = null;
  for (const deadline = Date.now() + 10_000; again !== userId && Date.now() < deadline; ) {
    again = await db.withContext(user, (c) => c`select auth.uid() as again`).then(
      (r) => r[0].again,
      () => null,
    );
    if (again !== userId) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  t.equal(again, userId, 'the lanes work after the kills');

  // The claims statement itself fails (a NUL byte PostgreSQL refuses in text): the work
  // is skipped and fails with that error, whether its statement is prepared already or
  // still being described; nothing is written; the lane goes on.
  const bad: RequestContext = { role: 'anon', claims: '{"role":"anon","x":"\u0000"}', claimsObject: {} };
  bad.claims = bad.claims.replace('\\u0000', '\u0000');
  const ins = (ctx: RequestContext, id: number) =>
    db.withContext(ctx, (c) => c`insert into public.notes values (${id}, null, 'x')`).then(
      () => null,
      (e: { code?: string }) => e.code ?? 'failed',
    );
  t.equal(await ins(anon, 19), null, 'the insert works with good claims (and is prepared on the lane now)');
  t.equal(await ins(bad, 20), '22021', 'claims refused, a prepared statement: the request fails with the claims\' error');
  const fresh = await db
    .withContext(bad, (c) => c`insert into public.notes (id, body) values (${21}, 'fresh')`)
    .then(() => null, (e: { code?: string }) => e.code);
  t.equal(fresh, '22021', 'claims refused, a statement still being described: the same');
  const [{ k }] = await tdb.sql`select count(*)::int as k from public.notes where id in (20, 21)`;
  t.equal(k, 0, 'the skipped work wrote nothing');
  // The same in a transaction: the work goes on after its claims failed (its statements
  // fail in the aborted transaction); the rollback waits for it, nothing is written.
  const txn = await db
    .transactionWithContext(bad, async (c) => {
      await c`select 1`.catch(() => {});
      // Work that takes a while (a body being read, say) before its next statement.
      await new Promise((resolve) => setTimeout(resolve, 30));
      await c`insert into public.notes (id, body) values (${22}, 'after')`.catch(() => {});
      return 'done';
    })
    .then(() => null, (e: { code?: string }) => e.code);
  t.equal(txn, '22021', 'transactionWithContext: the claims\' error');
  const [{ k2 }] = await tdb.sql`select count(*)::int as k2 from public.notes where id = 22`;
  t.equal(k2, 0, 'the work that went on wrote nothing');
  const fine = await db.withContext(anon, (c) => c`select 1 as one, ${2}::int as two`);
  t.same([...fine], [{ one: 1, two: 2 }], 'the lane goes on');

  // A lane held by a slow statement (running for longer than the lane stall time) takes no
  // request behind it: the next goes to another lane and is answered while the slow one runs.
  let slowDone = false;
  const slow = db.withContext(anon, (c) => c`select pg_sleep(${1.5})::text as slept`).then(() => (slowDone = true));
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
    const [{ n: running }] = await tdb.sql`select count(*)::int as n from pg_stat_activity
      where datname = current_database() and state = 'active' and query like '%pg_sleep%' and pid <> pg_backend_pid()
        and now() - query_start > interval '20 milliseconds'`;
    if (running > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const [{ quick }] = await db.withContext(anon, (c) => c`select ${'fast'}::text as quick`);
  t.same([quick, slowDone], ['fast', false], 'a request after a slow one is answered while the slow one runs');
  await slow;

  // A connection of a lane's login role, as a lane that reconnected would be: it runs as
  // its API role at most, and its own login role can read nothing.
  const stray = postgres({ ...postgres(tdb.url).options, user: 'plinth_anon', max: 1, onnotice: () => {} } as never) as postgres.Sql;
  t.teardown(() => stray.end());
  const [{ who: idle, session }] = await stray`select current_user as who, session_user as session`;
  t.same([idle, session], ['anon', 'plinth_anon'], 'a plain plinth_anon session runs as anon');
  const denied = await stray`select * from public.secrets`.catch((e: unknown) => e);
  t.equal((denied as { code?: string }).code, '42501', 'the lane session cannot read what anon cannot');
  const [{ r }] = await stray`select set_config('role', 'plinth_anon', false) as r`;
  t.equal(r, 'plinth_anon');
  const bare = await stray`select * from public.notes`.catch((e: unknown) => e);
  t.equal((bare as { code?: string }).code, '42501', 'its login role holds no privilege of its own');
});
