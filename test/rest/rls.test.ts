/**
 * Row-level security through the request context (interface §5; contract §3, §5): anon,
 * authenticated users, the guest role and service_role, each seeing and changing exactly
 * what the policies allow; credentials (401 missing credentials, development mode);
 * GET /rest/v1/rls-debug.
 */
import t from 'tap';
import { restApp, userToken, USER_A, USER_B } from './helpers.ts';
import { startApp } from '../helpers/app.ts';
import { SCHEMA_SQL, refresh } from './helpers.ts';

const app = await restApp(t, {
  sql: `insert into public.notes (id, owner, body, public) values
          (1, '${USER_A}', 'a private', false), (2, '${USER_A}', 'a public', true),
          (3, '${USER_B}', 'b private', false), (4, null, 'nobody''s public', true);
        select setval(pg_get_serial_sequence('public.notes', 'id'), 100);
        insert into public.secrets values (1, 'classified');`,
});
const sql = app.db.sql;
const tokenA = await userToken(USER_A);
const tokenB = await userToken(USER_B);
const guest = await userToken('00000000-0000-4000-8000-0000000000ee', { role: 'anonymous', extra: { is_anonymous: true } });

const ids = (body: unknown) => (body as { id: number }[]).map((x) => x.id).sort((a, b) => a - b);

t.test('anon sees only what its policies allow', async (t) => {
  const r = await app.call('GET', '/rest/v1/notes?select=id', { apikey: app.anonKey });
  t.equal(r.status, 200);
  t.same(ids(r.body), [2, 4]);
  const bearer = await app.call('GET', '/rest/v1/notes?select=id', { token: app.anonKey });
  t.same(ids(bearer.body), [2, 4], 'the anon key as Bearer too');
  const ins = await app.call('POST', '/rest/v1/notes', { apikey: app.anonKey, body: { body: 'anon note' } });
  t.equal(ins.status, 403, 'no policy lets anon insert');
  t.same(ins.body, { error: 'permission denied' });
  const upd = await app.call('PATCH', '/rest/v1/notes?id=eq.2', { apikey: app.anonKey, body: { body: 'defaced' } });
  t.equal(upd.status, 200);
  t.same(upd.body, [], 'no policy lets anon update: nothing matched');
  t.equal((await sql`select body from public.notes where id = 2`)[0].body, 'a public');
});

t.test('an authenticated user sees and changes only their own rows', async (t) => {
  const a = await app.call('GET', '/rest/v1/notes?select=id', { token: tokenA });
  t.same(ids(a.body), [1, 2]);
  const b = await app.call('GET', '/rest/v1/notes?select=id', { token: tokenB });
  t.same(ids(b.body), [3]);

  const ins = await app.call('POST', '/rest/v1/notes?select=owner,body', { token: tokenA, body: { body: 'new of a' } });
  t.equal(ins.status, 201);
  t.same(ins.body, [{ owner: USER_A, body: 'new of a' }], 'owner defaults to auth.uid()');
  const forged = await app.call('POST', '/rest/v1/notes', { token: tokenA, body: { body: 'forged', owner: USER_B } });
  t.equal(forged.status, 403, 'WITH CHECK refuses a row for someone else');
  t.same(forged.body, { error: 'permission denied' });

  const steal = await app.call('PATCH', '/rest/v1/notes?id=eq.3', { token: tokenA, body: { body: 'stolen' } });
  t.same(steal.body, [], 'another user’s row is invisible to PATCH');
  const del = await app.call('DELETE', '/rest/v1/notes?id=eq.3', { token: tokenA });
  t.same(del.body, [], 'and to DELETE');
  t.equal((await sql`select body from public.notes where id = 3`)[0].body, 'b private');

  const own = await app.call('PATCH', '/rest/v1/notes?id=eq.1&select=body', { token: tokenA, body: { body: 'edited' } });
  t.same(own.body, [{ body: 'edited' }]);
});

t.test('the guest role has its own policies and grants', async (t) => {
  const r = await app.call('GET', '/rest/v1/notes?select=id', { token: guest });
  t.equal(r.status, 200);
  t.same(ids(r.body), [2, 4]);
  const s = await app.call('GET', '/rest/v1/secrets', { token: guest });
  t.equal(s.status, 403);
});

t.test('service_role bypasses RLS', async (t) => {
  const r = await app.call('GET', '/rest/v1/notes?select=id&id=lte.4', { token: app.serviceKey });
  t.same(ids(r.body), [1, 2, 3, 4]);
  const viaApikey = await app.call('GET', '/rest/v1/notes?select=id&id=lte.4', { apikey: app.serviceKey });
  t.same(ids(viaApikey.body), [1, 2, 3, 4], 'the service key in apikey');
  const sec = await app.call('GET', '/rest/v1/secrets', { token: app.serviceKey });
  t.equal(sec.status, 200);
  t.same(sec.body, [{ id: 1, value: 'classified' }]);
});

t.test('the service role reaches a new table in public without a grant of its own', async (t) => {
  // Created by the role that runs migrations, with no GRANT: default privileges give it to
  // service_role only; functions still need an explicit GRANT EXECUTE.
  await sql.unsafe(`create table public.fresh (id int primary key, body text);
    create function public.fresh_count() returns bigint language sql as 'select count(*) from public.fresh';`);
  await refresh(app);
  const ins = await app.call('POST', '/rest/v1/fresh', { token: app.serviceKey, body: { id: 1, body: 'x' }, headers: { prefer: 'return=representation' } });
  t.equal(ins.status, 201);
  t.same(ins.body, [{ id: 1, body: 'x' }]);
  const read = await app.call('GET', '/rest/v1/fresh', { token: app.serviceKey });
  t.same(read.body, [{ id: 1, body: 'x' }]);
  for (const cred of [{ apikey: app.anonKey }, { token: tokenA }]) {
    const r = await app.call('GET', '/rest/v1/fresh', cred);
    t.equal(r.status, 403, 'the other API roles still need a GRANT');
  }
  const fn = await app.call('POST', '/rest/v1/rpc/fresh_count', { token: app.serviceKey, body: {} });
  t.equal(fn.status, 403, 'a function needs GRANT EXECUTE, the service role included');
});

t.test('a table without a grant is 403 for the API roles', async (t) => {
  for (const cred of [{ apikey: app.anonKey }, { token: tokenA }, { token: guest }]) {
    const r = await app.call('GET', '/rest/v1/secrets', cred);
    t.equal(r.status, 403);
    t.same(r.body, { error: 'permission denied' });
  }
});

t.test('credentials: none is 401 missing credentials; a bad token is 401', async (t) => {
  for (const [method, path] of [
    ['GET', '/rest/v1/notes'],
    ['POST', '/rest/v1/notes'],
    ['PATCH', '/rest/v1/notes?id=eq.1'],
    ['DELETE', '/rest/v1/notes?id=eq.1'],
    ['GET', '/rest/v1/rpc/add?a=1&b=2'],
    ['POST', '/rest/v1/rpc/add'],
    ['POST', '/rest/v1/batch'],
    ['GET', '/rest/v1/'],
    ['GET', '/rest/v1/rls-debug'],
    ['GET', '/rest/v1/nosuchtable'],
  ] as const) {
    const r = await app.call(method, path, { body: method === 'GET' || method === 'DELETE' ? undefined : {} });
    t.equal(r.status, 401, `${method} ${path}`);
    t.same(r.body, { error: 'missing credentials' });
  }
  const bad = await app.call('GET', '/rest/v1/notes', { token: 'not.a.jwt' });
  t.equal(bad.status, 401);
  t.same(bad.body, { error: 'invalid or expired token' });
  const badWithKey = await app.call('GET', '/rest/v1/notes', { token: 'not.a.jwt', apikey: app.anonKey });
  t.equal(badWithKey.status, 401, 'a failing bearer wins over a good apikey');
});

t.test('GET /rest/v1/rls-debug echoes the resolved role and claims', async (t) => {
  const anon = await app.call('GET', '/rest/v1/rls-debug', { apikey: app.anonKey });
  t.equal(anon.status, 200);
  t.same(anon.body, { role: 'anon', claims: { role: 'anon' } });
  const service = await app.call('GET', '/rest/v1/rls-debug', { token: app.serviceKey });
  t.same(service.body, { role: 'service_role', claims: { role: 'service_role' } });
  const user = await app.call('GET', '/rest/v1/rls-debug', { token: tokenA });
  t.equal(user.body.role, 'authenticated');
  t.equal(user.body.claims.sub, USER_A);
  t.equal(user.body.claims.aud, 'authenticated');
  t.equal(user.body.claims.role, 'authenticated');
  const g = await app.call('GET', '/rest/v1/rls-debug', { token: guest });
  t.equal(g.body.role, 'anonymous');
  t.equal(g.body.claims.is_anonymous, true);
});

t.test('claims reach SQL: auth.uid() inside a request is the caller', async (t) => {
  const r = await app.call('GET', '/rest/v1/rpc/whoami', { token: tokenA });
  t.same(r.body, { role: 'authenticated', sub: USER_A });
  const anon = await app.call('GET', '/rest/v1/rpc/whoami', { apikey: app.anonKey });
  t.same(anon.body, { role: 'anon', sub: null });
});

t.test('development mode: no credential passes as anon', async (t) => {
  const dev = await startApp(t, { worker: false, env: { JWT_SECRET: undefined } });
  await dev.db.sql.unsafe(SCHEMA_SQL).simple();
  await dev.db.sql`insert into public.notes (owner, body, public) values (null, 'open', true), (null, 'closed', false)`;
  await refresh(dev);
  const r = await dev.call('GET', '/rest/v1/notes?select=body');
  t.equal(r.status, 200);
  t.same(r.body, [{ body: 'open' }]);
  const dbg = await dev.call('GET', '/rest/v1/rls-debug');
  t.same(dbg.body, { role: 'anon', claims: { role: 'anon' } });
});
