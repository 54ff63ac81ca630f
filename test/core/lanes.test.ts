/**
 * The request lanes cannot change role (issue 11): SQL that runs as anon — a SECURITY
 * INVOKER function calling set_config('role', …), a plpgsql body doing `execute 'set
 * role …'` or `reset role` — can become neither the owner nor another API role, through
 * RPC and batch; each attempt fails with a mapped error and reads nothing. The session user
 * of every lane is no superuser and a member of one API role only. A statement that runs
 * past its role's statement_timeout is cancelled and mapped as interface §7.2 says.
 *
 * (The `/functions/v1/` plv8 path: test/functions/lanes.test.ts.)
 */
import t from 'tap';
import { pino } from 'pino';
import { warnIfStatementNamesShow } from '../../src/host/migrate.ts';
import { createTestDatabase } from '../helpers/database.ts';
import type { RequestContext } from '../../src/core/db.ts';
import { restApp, userToken, USER_A, USER_B } from '../rest/helpers.ts';

const app = await restApp(t);
const sql = app.db.sql;
const [{ owner }] = await sql<{ owner: string }[]>`select current_user as owner`;

await sql.unsafe(`
  create table public.owner_only (secret text);
  insert into public.owner_only values ('owner secret');
  create table public.hidden (id int primary key, body text);
  alter table public.hidden enable row level security;
  grant select on public.hidden to anon, authenticated, service_role;
  insert into public.hidden values (1, 'hidden row');

  create function public.become_owner() returns setof text language plpgsql security invoker as $f$
  begin
    perform pg_catalog.set_config('role', '${owner}', true);
    return query select secret from public.owner_only;
  end $f$;
  create function public.become_service() returns setof text language plpgsql security invoker as $f$
  begin
    perform pg_catalog.set_config('role', 'service_role', true);
    return query select body from public.hidden;
  end $f$;
  create function public.exec_set_role_owner() returns setof text language plpgsql security invoker as $f$
  begin
    execute 'set role ${owner}';
    return query select secret from public.owner_only;
  end $f$;
  create function public.exec_set_role_service() returns setof text language plpgsql security invoker as $f$
  begin
    execute 'set role service_role';
    return query select body from public.hidden;
  end $f$;
  create function public.reset_then_owner() returns setof text language plpgsql security invoker as $f$
  begin
    reset role;
    return query select secret from public.owner_only;
  end $f$;
  create function public.reset_then_hidden() returns setof text language plpgsql security invoker as $f$
  begin
    reset role;
    return query select body from public.hidden;
  end $f$;
  create function public.become_login_role() returns setof text language plpgsql security invoker as $f$
  begin
    perform pg_catalog.set_config('role', session_user, true);
    return query select body from public.hidden;
  end $f$;
  create function public.slow(seconds float8) returns int language sql security invoker as $f$
    select 1 from (select pg_catalog.pg_sleep(seconds)) s
  $f$;
  -- Prepared statements on a lane (migration 000011): names hidden, none replaceable.
  create function public.prepared_names() returns setof text language plpgsql security invoker as $f$
  begin
    return query select name::text from pg_catalog.pg_prepared_statements;
  end $f$;
  -- The claims statement replaced by one that sets claims of the caller's choosing: found by
  -- its text where the names can be read, else under the name it once had.
  create function public.hijack_claims(p_claims text) returns int language plpgsql security invoker as $f$
  declare
    target text := 'plinth_claims';
  begin
    begin
      select name into target from pg_catalog.pg_prepared_statements where statement like '%request.jwt.claims%';
    exception when insufficient_privilege then
      null;
    end;
    execute format('deallocate %I', target);
    execute format('prepare %I (text, text) as select from pg_catalog.set_config(''request.jwt.claims'', %L, true) _c, '
                   'pg_catalog.set_config(''statement_timeout'', $2, true) _t', target, p_claims);
    return 1;
  end $f$;
  create function public.deallocate_all() returns int language plpgsql security invoker as $f$
  begin
    execute 'deallocate all';
    return 1;
  end $f$;
  grant execute on all functions in schema public to anon, authenticated;
`);
const refreshed = await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
if (refreshed.status !== 200) throw new Error('catalog refresh failed');

const ESCAPES = [
  'become_owner',
  'become_service',
  'exec_set_role_owner',
  'exec_set_role_service',
  'reset_then_owner',
] as const;

t.test('sanity: the service role reads the hidden row, anon does not', async (t) => {
  const service = await app.call('GET', '/rest/v1/hidden?select=body', { token: app.serviceKey });
  t.same(service.body, [{ body: 'hidden row' }]);
  const anon = await app.call('GET', '/rest/v1/hidden?select=body', { apikey: app.anonKey });
  t.same(anon.body, [], 'RLS shows anon nothing');
});

t.test('RPC as anon: no way to the owner or to service_role', async (t) => {
  for (const fn of ESCAPES) {
    const r = await app.call('POST', `/rest/v1/rpc/${fn}`, { apikey: app.anonKey });
    t.equal(r.status, 403, `${fn}: 403`);
    t.same(r.body, { error: 'permission denied' }, `${fn}: the mapped message`);
    t.notMatch(r.text, /owner secret|hidden row/, `${fn}: nothing read`);
  }
  const reset = await app.call('POST', '/rest/v1/rpc/reset_then_hidden', { apikey: app.anonKey });
  t.equal(reset.status, 200, 'reset role leaves anon: allowed, but ...');
  t.same(reset.body, [], '... it reads nothing RLS hides');
  const login = await app.call('POST', '/rest/v1/rpc/become_login_role', { apikey: app.anonKey });
  t.equal(login.status, 403, 'the lane login role itself holds no privilege');
  t.notMatch(login.text, /hidden row/);
});

t.test('RPC as a signed-in user: no way to service_role either', async (t) => {
  const token = await userToken(USER_A);
  for (const fn of ['become_service', 'exec_set_role_service', 'become_owner'] as const) {
    const r = await app.call('POST', `/rest/v1/rpc/${fn}`, { token });
    t.equal(r.status, 403, `${fn}: 403`);
    t.notMatch(r.text, /owner secret|hidden row/);
  }
});

t.test('batch as anon: every attempt fails, nothing read', async (t) => {
  for (const fn of ESCAPES) {
    const r = await app.call('POST', '/rest/v1/batch', {
      apikey: app.anonKey,
      body: { atomic: false, operations: [{ method: 'POST', path: `/rest/v1/rpc/${fn}` }] },
    });
    t.notMatch(r.text, /owner secret|hidden row/, `${fn}: nothing read`);
    const op = r.body.results?.[0];
    t.equal(op?.status, 403, `${fn}: the operation answers 403`);
    t.equal(op?.error, 'permission denied', `${fn}: the mapped message`);
  }
  const atomic = await app.call('POST', '/rest/v1/batch', {
    apikey: app.anonKey,
    body: { operations: [{ method: 'GET', path: '/rest/v1/hidden' }, { method: 'POST', path: '/rest/v1/rpc/become_service' }] },
  });
  t.equal(atomic.status, 422, 'atomic: the batch fails as a whole');
  t.notMatch(atomic.text, /hidden row/);
});

t.test('the session user of every lane is no superuser and a member of one API role only', async (t) => {
  const db = app.service.db;
  const roles = ['anon', 'authenticated', 'service_role', app.config.anonymousRole];
  const probe = `select session_user::text as login, current_user::text as role,
      (select rolsuper from pg_catalog.pg_roles where rolname = session_user) as superuser,
      (select rolinherit from pg_catalog.pg_roles where rolname = session_user) as inherit,
      array(select r.rolname::text from pg_catalog.pg_auth_members m
              join pg_catalog.pg_roles r on r.oid = m.roleid
             where m.member = (select oid from pg_catalog.pg_roles where rolname = session_user)) as member_of,
      (select count(*)::int from pg_catalog.pg_class where relowner = (select oid from pg_catalog.pg_roles where rolname = session_user)) as owns`;
  for (const role of roles) {
    const ctx: RequestContext = { role, claims: JSON.stringify({ role }), claimsObject: { role } };
    const [lane] = await db.withContext(ctx, (c) => c.unsafe(probe, [], { prepare: true }));
    t.equal(lane.role, role, `${role}: runs as ${role}`);
    t.not(lane.login, owner, `${role}: not the owner`);
    t.equal(lane.superuser, false, `${role}: session user ${lane.login} is no superuser`);
    t.equal(lane.inherit, false, `${role}: NOINHERIT`);
    t.same(lane.member_of, [role], `${role}: member of ${role} only`);
    t.equal(lane.owns, 0, `${role}: owns nothing`);
    const [txn] = await db.transactionWithContext(ctx, async (c) => c.unsafe(probe));
    t.same([txn.login, txn.role, txn.superuser, txn.member_of], [lane.login, role, false, [role]], `${role}: the transaction pool too`);
  }
});

t.test('prepared statements on a lane: SQL as an API role cannot read their names', async (t) => {
  for (const who of [{ apikey: app.anonKey }, { token: await userToken(USER_A) }]) {
    const r = await app.call('POST', '/rest/v1/rpc/prepared_names', who);
    t.equal(r.status, 403, 'pg_prepared_statements: 403');
    t.same(r.body, { error: 'permission denied' });
    t.notMatch(r.text, /plinth_claims/);
  }
});

t.test('prepared statements on a lane: the claims statement cannot be replaced', async (t) => {
  const [tokenA, tokenB] = await Promise.all([userToken(USER_A), userToken(USER_B)]);
  const before = await app.call('POST', '/rest/v1/rpc/whoami', { token: tokenB });
  t.equal(before.body.sub, USER_B, 'sanity: B is B (whoami: test/rest/schema.sql)');
  // Requests one at a time all go to the same lane (the first with room).
  const hijack = await app.call('POST', '/rest/v1/rpc/hijack_claims', {
    token: tokenA,
    body: { p_claims: JSON.stringify({ role: 'authenticated', sub: USER_A }) },
  });
  t.not(hijack.status, 200, 'the replacement fails');
  t.type(hijack.body.error, 'string', 'with a mapped error');
  for (let i = 0; i < 5; i++) {
    const r = await app.call('POST', '/rest/v1/rpc/whoami', { token: tokenB });
    t.equal(r.status, 200);
    t.equal(r.body.sub, USER_B, `request ${i + 1} after it: B is still B`);
  }
});

t.test('prepared statements on a lane: a DEALLOCATE ALL makes them prepare again', async (t) => {
  const [tokenA, tokenB] = await Promise.all([userToken(USER_A), userToken(USER_B)]);
  // One at a time, each role's requests go to its first lane: A's deallocation hits B's next request.
  for (let round = 0; round < 3; round++) {
    const r = await app.call('POST', '/rest/v1/rpc/deallocate_all', { token: tokenA });
    t.equal(r.status, 200, 'allowed: it drops nothing that is not prepared again');
    const b = await app.call('POST', '/rest/v1/rpc/whoami', { token: tokenB });
    t.same([b.status, b.body], [200, { role: 'authenticated', sub: USER_B }], `round ${round + 1}: the next request runs, with its own claims`);
  }
  // A statement the lane never prepared before, right after: parsed with the claims statement, it runs.
  await app.call('POST', '/rest/v1/rpc/deallocate_all', { token: tokenA });
  const first = await app.call('GET', '/rest/v1/hidden?select=id,body', { token: tokenB });
  t.same([first.status, first.body], [200, []], 'a new statement right after: runs, with its own claims (RLS shows B nothing)');
  const batch = await app.call('POST', '/rest/v1/batch', {
    token: tokenB,
    body: { operations: [{ method: 'POST', path: '/rest/v1/rpc/deallocate_all' }, { method: 'POST', path: '/rest/v1/rpc/whoami' }] },
  });
  t.equal(batch.status, 200, 'in a batch (the transaction pool) the next statement runs too');
  t.same(batch.body.results?.[1]?.data, { role: 'authenticated', sub: USER_B });
});

t.test('the start warns while pg_prepared_statements is readable by every role', async (t) => {
  const db = await createTestDatabase(t);
  const lines: { level: number; msg: string }[] = [];
  const log = pino({ level: 'warn' }, { write: (chunk: string) => lines.push(JSON.parse(chunk)) });
  t.equal(await warnIfStatementNamesShow(db.url, log), false, 'migrated: hidden');
  t.same(lines, [], 'and nothing said');
  await db.sql`grant select on pg_catalog.pg_prepared_statements to public`;
  t.equal(await warnIfStatementNamesShow(db.url, log), true, 'granted to PUBLIC again: shows');
  t.equal(lines.length, 1, 'one line');
  t.equal(lines[0].level, 40, 'at warn');
  t.match(lines[0].msg, /revoke select on pg_catalog\.pg_prepared_statements from public/, 'naming the fix');
});

t.test('statement timeout: per API role, from the database, mapped as §7.2', async (t) => {
  // anon's default is 3 s; make it short for the test, as a DBA would, and reload.
  await sql.unsafe(`alter role anon in database ${app.db.name} set statement_timeout = '150ms'`);
  t.teardown(() => sql.unsafe(`alter role anon in database ${app.db.name} reset statement_timeout`));
  await sql`select pg_notify('plinth_cache', 'roles')`;
  const deadline = Date.now() + 10_000;
  let r = await app.call('POST', '/rest/v1/rpc/slow', { apikey: app.anonKey, body: { seconds: 2 } });
  while (r.status === 200 && Date.now() < deadline) {
    r = await app.call('POST', '/rest/v1/rpc/slow', { apikey: app.anonKey, body: { seconds: 2 } });
  }
  t.equal(r.status, 500, 'a cancelled statement (57014) is "anything else": 500');
  t.same(r.body, { error: 'internal database error' });
  const fast = await app.call('POST', '/rest/v1/rpc/slow', { apikey: app.anonKey, body: { seconds: 0 } });
  t.equal(fast.status, 200, 'the lane is usable right after');
  const user = await app.call('POST', '/rest/v1/rpc/slow', { token: await userToken(USER_A), body: { seconds: 0.3 } });
  t.equal(user.status, 200, 'authenticated keeps its own (8 s) timeout');
  const [{ timeout }] = await app.service.db.withContext(
    { role: 'authenticated', claims: '{}', claimsObject: {} },
    (c) => c`select current_setting('statement_timeout') as timeout`,
  );
  t.equal(timeout, '8s', "authenticated's default from the migration");
});

t.test('cancelAll cancels running request statements', async (t) => {
  const db = app.service.db;
  const ctx: RequestContext = { role: 'service_role', claims: '{"role":"service_role"}', claimsObject: { role: 'service_role' } };
  // Long enough that a loaded machine cannot finish it before it is found and cancelled.
  const running = db.withContext(ctx, (c) => c`select pg_sleep(60)`).then(
    () => 'finished',
    (e: { code?: string }) => e.code,
  );
  const deadline = Date.now() + 30_000;
  let cancelled = 0;
  while (cancelled === 0 && Date.now() < deadline) cancelled = await db.cancelAll();
  t.equal(cancelled, 1, 'one statement cancelled');
  t.equal(await running, '57014', 'the request fails with 57014');
});
