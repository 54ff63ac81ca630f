/**
 * POST /api/sql over real HTTP runs as plinth_sql, never as the owner: the test database's
 * own connection is a superuser, as the embedded start's is, and the endpoint must not be one.
 * Each attack (read the role, run a program, read a server file, switch back to the owner)
 * is refused; DDL on public still works and what it makes is served by REST.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';

// A table of the application's, made as a DBA's migration would (owned by the migration role).
const db = await createTestDatabase(t);
await db.sql`create table public.made_by_migration (id serial primary key, title text)`;
const app = await startApp(t, { worker: false, env: { ENABLE_SQL_ENDPOINT: 'true' }, db });
const q = (query: string) => app.call('POST', '/api/sql', { token: app.serviceKey, body: { query } });

t.test('the situation is the embedded one: the service connects as a superuser', async (t) => {
  const [{ su }] = await app.db.sql<{ su: boolean }[]>`select rolsuper as su from pg_roles where rolname = current_user`;
  t.equal(su, true);
});

t.test('the endpoint is not a superuser and holds no server-file or program role', async (t) => {
  const r = await q('select rolsuper from pg_roles where rolname = current_user');
  t.same([r.status, r.body], [200, [{ rolsuper: false }]]);
  const who = await q('select current_user as u, session_user as s');
  t.same(who.body, [{ u: 'plinth_sql', s: 'plinth_sql' }], 'it logged in as plinth_sql');
  const roles = await q(`select pg_has_role('pg_execute_server_program', 'member') as x, pg_has_role('pg_read_server_files', 'member') as r,
    pg_has_role('pg_write_server_files', 'member') as w`);
  t.same(roles.body, [{ x: false, r: false, w: false }]);
});

t.test('copy … to program, a server file and a way back to the owner are refused', async (t) => {
  const marker = `/tmp/plinth-sql-role-${process.pid}`;
  for (const [name, query] of [
    ['copy to program', `copy (select 1) to program 'id > ${marker}'`],
    ['copy from program', "create temp table y (v text); copy y from program 'id'"],
    ['read a server file', "select pg_read_file('/etc/hostname')"],
    ['copy from a server file', 'create temp table x (v text); copy x from \'/etc/hostname\''],
    ['reset role, then a program', `reset role; copy (select 1) to program 'id > ${marker}'`],
    ['set role to the owner', 'set role postgres; select 1'],
    ['set session authorization', 'set session authorization postgres; select 1'],
    // Roles are the cluster's: should either pass (the attack working), the division by zero
    // rolls it back, so a run without the fix leaves no superuser behind for other tests.
    ['alter itself into a superuser', 'alter role plinth_sql superuser; select 1 / 0'],
    ['grant itself the program role', 'grant pg_execute_server_program to plinth_sql; select 1 / 0'],
  ] as const) {
    const r = await q(query);
    t.equal(r.status, 403, `${name}: 403`);
    t.same(r.body, { error: 'permission denied' }, `${name}: no database text`);
  }
  const reset = await q('reset role; select current_user as u');
  t.same(reset.body, [{ u: 'plinth_sql' }], 'RESET ROLE stays plinth_sql');
  const [{ exists }] = await app.db.sql<{ exists: boolean }[]>`select (pg_stat_file(${marker}, true)) is not null as exists`;
  t.equal(exists, false, 'no program ran');
});

t.test('DDL on public still works, and REST serves what it made', async (t) => {
  const r = await q(`create table public.made_by_sql (id bigint generated always as identity primary key, v text);
    insert into public.made_by_sql (v) values ('one');
    select v from public.made_by_sql`);
  t.same([r.status, r.body], [200, [{ v: 'one' }]]);
  const [{ owner }] = await app.db.sql<{ owner: string }[]>`select tableowner as owner from pg_tables where tablename = 'made_by_sql'`;
  t.equal(owner, 'plinth_sql');
  // The catalog reloads on the DDL's notification: wait for it, with a deadline.
  const deadline = Date.now() + 15_000;
  let rest = await app.call('GET', '/rest/v1/made_by_sql?select=v', { token: app.serviceKey, apikey: app.serviceKey });
  while (rest.status === 404 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    rest = await app.call('GET', '/rest/v1/made_by_sql?select=v', { token: app.serviceKey, apikey: app.serviceKey });
  }
  t.same([rest.status, rest.body], [200, [{ v: 'one' }]], 'the service role reaches the new table by default');
  const demo = await q("insert into public.made_by_migration (title) values ('from sql') returning title");
  t.same([demo.status, demo.body], [200, [{ title: 'from sql' }]], "the migrations' tables are read and written");
  const drop = await q('drop table public.made_by_sql');
  t.equal(drop.status, 200, 'and dropped');
});
