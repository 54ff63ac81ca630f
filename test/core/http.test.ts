/**
 * The HTTP shell and the development endpoints over real HTTP: body errors, unknown
 * routes, CORS, the service-role gate, /api/sql and /api/demo (interface §4.10, contract §8–§10).
 */
import t from 'tap';
import { SignJWT } from 'jose';
import { startApp, TEST_JWT_SECRET } from '../helpers/app.ts';
import { pgErrorToAppError } from '../../src/core/errors.ts';

const secret = new TextEncoder().encode(TEST_JWT_SECRET);
const sign = (claims: Record<string, unknown>, exp = '1h') =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime(exp).sign(secret);

t.test('SQLSTATE mapping (interface §7.2)', async (t) => {
  const cases: Array<[string, number, string]> = [
    ['23505', 409, 'duplicate value violates unique constraint'],
    ['42501', 403, 'permission denied'],
    ['42P01', 400, 'invalid request'],
    ['42601', 400, 'invalid request'],
    ['22P02', 400, 'invalid request'],
    ['23502', 400, 'invalid request'],
    ['23503', 400, 'invalid request'],
    ['P0001', 500, 'internal database error'],
    ['PT404', 500, 'internal database error'],
    ['XX000', 500, 'internal database error'],
    ['08006', 503, 'database unavailable'],
    ['ECONNREFUSED', 503, 'database unavailable'],
  ];
  for (const [code, status, message] of cases) {
    const e = pgErrorToAppError({ code, message: 'secret database text' });
    t.same([e.status, e.publicMessage], [status, message], code);
  }
  const trusted = pgErrorToAppError({ code: 'PT409', message: 'email already registered' }, { trusted: true });
  t.same([trusted.status, trusted.publicMessage], [409, 'email already registered'], 'PTnnn is trusted only when the caller says so');
});

t.test('body errors, unknown routes and CORS', async (t) => {
  const app = await startApp(t, {
    worker: false,
    env: { ENABLE_SQL_ENDPOINT: 'true', MAX_BODY_BYTES: '1000', ALLOWED_ORIGINS: 'https://app.test', SITE_URL: 'https://site.test' },
  });
  const key = app.serviceKey;
  let r = await app.call('POST', '/api/sql', { token: key, raw: '{"query": ', headers: { 'content-type': 'application/json' } });
  t.same([r.status, r.body], [400, { error: 'invalid request body' }], 'malformed JSON');
  r = await app.call('POST', '/api/sql', { token: key, raw: 'query=select 1', headers: { 'content-type': 'text/plain' } });
  t.same([r.status, r.body], [400, { error: 'invalid request body' }], 'a content type other than JSON');
  r = await app.call('POST', '/api/sql', { token: key, body: { query: 42 } });
  t.same([r.status, r.body], [400, { error: 'invalid request body' }], 'a field of the wrong type (no coercion)');
  r = await app.call('POST', '/api/sql', { token: key, body: {} });
  t.same([r.status, r.body], [400, { error: 'invalid request body' }], 'a missing field');
  r = await app.call('POST', '/api/sql', { token: key, headers: { 'content-type': 'application/json' } });
  t.same([r.status, r.body], [400, { error: 'invalid request body' }], 'a missing body');
  r = await app.call('POST', '/api/sql', { token: key, body: { query: 'select 1 -- ' + 'x'.repeat(2000) } });
  t.same([r.status, r.body], [413, { error: 'request body too large' }], 'over MAX_BODY_BYTES');
  r = await app.call('GET', '/nowhere');
  t.same([r.status, r.body], [404, { error: 'not found' }], 'unknown route');

  r = await app.call('OPTIONS', '/rest/v1/anything', { headers: { origin: 'https://app.test' } });
  t.equal(r.status, 204, 'OPTIONS on any route');
  t.equal(r.headers.get('access-control-allow-origin'), 'https://app.test');
  t.equal(r.headers.get('access-control-allow-methods'), 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
  t.equal(
    r.headers.get('access-control-allow-headers'),
    'authorization, apikey, content-type, prefer, range, x-upsert, x-client-info, cache-control, tus-resumable, upload-length, upload-offset, upload-metadata, upload-defer-length, plinth-wrote',
  );
  r = await app.call('GET', '/health', { headers: { origin: 'https://site.test' } });
  t.equal(r.headers.get('access-control-allow-origin'), 'https://site.test', "SITE_URL's origin is allowed");
  t.match(r.headers.get('vary') ?? '', /Origin/);
  t.equal(r.headers.get('access-control-expose-headers'), 'Content-Range, Location, Tus-Resumable, Upload-Offset, Upload-Length, Upload-Expires, X-Request-Id, Plinth-Wrote', 'a page script can read the request id and the write marker');
  r = await app.call('GET', '/health', { headers: { origin: 'https://evil.test' } });
  t.equal(r.headers.get('access-control-allow-origin'), null, 'other origins are not echoed');

  const permissive = await startApp(t, { worker: false, db: app.db, env: { ALLOW_PERMISSIVE_CORS: 'true' } });
  r = await permissive.call('GET', '/health', { headers: { origin: 'https://evil.test' } });
  t.equal(r.headers.get('access-control-allow-origin'), 'https://evil.test', 'ALLOW_PERMISSIVE_CORS echoes any origin');
});

t.test('credentials on a service-role endpoint (contract §3)', async (t) => {
  const app = await startApp(t, { worker: false, env: { ENABLE_SQL_ENDPOINT: 'true' } });
  const body = { query: 'select 1 as one' };
  const expired = await sign({ role: 'service_role' }, '-1m');
  const wrongKey = await new SignJWT({ role: 'service_role' }).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode('x'.repeat(40)));
  const superuser = await sign({ role: 'postgres' });
  const cases: Array<[string, Record<string, string>, number, string | null]> = [
    ['no credential', {}, 401, 'missing credentials'],
    ['anon key', { authorization: `Bearer ${app.anonKey}` }, 403, 'service role required'],
    ['service key as bearer', { authorization: `Bearer ${app.serviceKey}` }, 200, null],
    ['service key as apikey', { apikey: app.serviceKey }, 200, null],
    ['an expired token', { authorization: `Bearer ${expired}` }, 401, 'invalid or expired token'],
    ['a token signed with another secret', { authorization: `Bearer ${wrongKey}` }, 401, 'invalid or expired token'],
    ['a role the service never sets', { authorization: `Bearer ${superuser}` }, 401, 'invalid or expired token'],
    ['a malformed Authorization header', { authorization: 'Basic abc' }, 401, 'invalid or expired token'],
    ['a failing bearer wins over a valid apikey', { authorization: `Bearer ${expired}`, apikey: app.serviceKey }, 401, 'invalid or expired token'],
    ['bearer is read before apikey', { authorization: `Bearer ${app.anonKey}`, apikey: app.serviceKey }, 403, 'service role required'],
  ];
  for (const [name, headers, status, error] of cases) {
    const r = await app.call('POST', '/api/sql', { headers, body });
    t.equal(r.status, status, name);
    if (error !== null) t.same(r.body, { error }, `${name}: message`);
  }
  const user = await sign({ role: 'authenticated', sub: '11111111-1111-4111-8111-111111111111' });
  const r = await app.call('POST', '/api/sql', { apikey: user, body });
  t.same([r.status, r.body], [401, { error: 'invalid or expired token' }], 'apikey is honoured only for the anon and service-role keys');
});

t.test('/api/sql', async (t) => {
  const off = await startApp(t, { worker: false });
  t.equal((await off.call('POST', '/api/sql', { token: off.serviceKey, body: { query: 'select 1' } })).status, 404, 'not mounted by default');

  const app = await startApp(t, { worker: false, db: off.db, env: { ENABLE_SQL_ENDPOINT: 'true' } });
  const q = (query: string) => app.call('POST', '/api/sql', { token: app.serviceKey, body: { query } });
  let r = await q("select 1 as one, 'x' as s");
  t.same([r.status, r.body], [200, [{ one: 1, s: 'x' }]]);
  r = await q('create table public.t_sql (id int); insert into public.t_sql values (1), (2); select id from public.t_sql order by id');
  t.same([r.status, r.body], [200, [{ id: 1 }, { id: 2 }]], 'several statements: the rows of the last');
  r = await q('create table public.t_sql2 (id int)');
  t.same([r.status, r.body], [200, []], 'DDL answers []');
  r = await q('selec 1');
  t.same([r.status, r.body], [400, { error: 'invalid request' }], 'syntax error, no database text');
  r = await q("insert into public.t_sql values (3); do $$ begin raise exception 'boom secret'; end $$");
  t.same([r.status, r.body], [500, { error: 'internal database error' }], 'a raise is internal, its text hidden');
  const [{ n }] = await app.db.sql`select count(*)::int as n from public.t_sql where id = 3`;
  t.equal(n, 0, 'one transaction: the failed text left nothing behind');
});

t.test('/api/demo mount rule and actions', async (t) => {
  const off = await startApp(t, { worker: false });
  t.equal((await off.call('POST', '/api/demo', { token: off.serviceKey, body: { action: 'insert' } })).status, 404, 'off by default');

  const explicit = await startApp(t, { worker: false, db: off.db, env: { SERVICE_ROLE_KEY: off.serviceKey } });
  t.equal((await explicit.call('POST', '/api/demo', { token: off.serviceKey, body: { action: 'insert', title: 'k' } })).status, 200, 'mounted when SERVICE_ROLE_KEY is set explicitly');

  const app = await startApp(t, { worker: false, db: off.db, env: { ENABLE_DEMO_ENDPOINT: 'true' } });
  let r = await app.call('POST', '/api/demo', { token: app.anonKey, body: { action: 'insert' } });
  t.same([r.status, r.body], [403, { error: 'service role required' }], 'always requires the service-role key');
  r = await app.call('POST', '/api/demo', { body: { action: 'insert' } });
  t.equal(r.status, 401);
  r = await app.call('POST', '/api/demo', { token: app.serviceKey, body: { action: 'insert', title: 'hello' } });
  t.equal(r.status, 200);
  t.equal(r.body.title, 'hello');
  const id = r.body.id;
  r = await app.call('POST', '/api/demo', { token: app.serviceKey, body: { action: 'update', id, title: 'changed' } });
  t.same([r.status, r.body.title, r.body.id], [200, 'changed', id]);
  r = await app.call('POST', '/api/demo', { token: app.serviceKey, body: { action: 'delete', id } });
  t.same([r.status, r.body.id], [200, id]);
  r = await app.call('POST', '/api/demo', { token: app.serviceKey, body: { action: 'delete', id } });
  t.same([r.status, r.body], [404, { error: 'not found' }], 'an unknown id');
  r = await app.call('POST', '/api/demo', { token: app.serviceKey, body: { action: 'explode' } });
  t.same([r.status, r.body], [400, { error: 'invalid request body' }]);
  r = await app.call('POST', '/api/demo', { token: app.serviceKey, body: { action: 'update' } });
  t.same([r.status, r.body], [400, { error: 'invalid request body' }], 'update needs an id');
});
