/**
 * RPC (interface §4.4, §7.2; contract §9): resolution by name and argument names, POST with
 * JSON arguments, GET with query-string arguments cast to the declared types, result
 * shapes, invoker and definer, EXECUTE grants, Cache-Control, exception text never returned.
 */
import t from 'tap';
import { restApp, SEED_SQL, userToken, USER_A } from './helpers.ts';
import { startApp } from '../helpers/app.ts';
import { SCHEMA_SQL, refresh } from './helpers.ts';

const app = await restApp(t, {
  sql: SEED_SQL + `insert into public.notes (owner, body) values ('${USER_A}', 'mine'), ('00000000-0000-4000-8000-0000000000ff', 'theirs');`,
});
const post = (name: string, body?: unknown, opts: { token?: string } = {}) =>
  app.call('POST', `/rest/v1/rpc/${name}`, { apikey: opts.token ? undefined : app.anonKey, token: opts.token, body });
const get = (pathAndQuery: string) => app.call('GET', `/rest/v1/rpc/${pathAndQuery}`, { apikey: app.anonKey });

t.test('scalar functions answer a bare JSON value', async (t) => {
  const p = await post('add', { a: 2, b: 3 });
  t.equal(p.status, 200);
  t.equal(p.text, '5');
  const g = await get('add?a=2&b=40');
  t.equal(g.status, 200);
  t.equal(g.text, '42', 'GET: query-string arguments cast to int');
  const s = await post('greet', { name: 'Ada' });
  t.equal(s.text, '"hello, Ada"', 'a default fills the missing argument');
  const s2 = await get('greet?name=Ada&greeting=hi');
  t.same(s2.body, 'hi, Ada');
  const j = await post('echo', { payload: { a: [1, 2], b: null } });
  t.same(j.body, { a: [1, 2], b: null }, 'jsonb arguments and results');
  const arr = await post('sum_all', { nums: [1, 2, 3, 4] });
  t.equal(arr.text, '10', 'a JSON array for an int[] argument');
  const arrGet = await get('sum_all?nums={5,6}');
  t.equal(arrGet.text, '11', 'an array literal in the query string');
  const mood = await get('mood_of?m=sad');
  t.same(mood.body, 'sad', 'enum argument');
  const nul = await post('greet', { name: null });
  t.equal(nul.text, 'null', 'a null result is JSON null');
});

t.test('set-returning functions answer an array, even for one row', async (t) => {
  const names = await post('author_names');
  t.equal(names.status, 200);
  t.same(names.body, ['Ursula Le Guin', 'Italo Calvino', 'Anonymous Writer']);
  const rows = await get('authors_born_after?d=1925-01-01');
  t.equal(rows.status, 200);
  t.same((rows.body as any[]).map((r) => r.name), ['Ursula Le Guin'], 'one row is still an array');
  const none = await post('authors_born_after', { d: '2100-01-01' });
  t.same(none.body, [], 'no rows: []');
});

t.test('Prefer: count= on a function without result columns counts what it returned', async (t) => {
  const counted = { apikey: app.anonKey, headers: { prefer: 'count=exact' } };
  const scalar = await app.call('POST', '/rest/v1/rpc/add', { ...counted, body: { a: 1, b: 2 } });
  t.equal(scalar.status, 200);
  t.equal(scalar.body, 3);
  t.equal(scalar.headers.get('content-range'), '0-0/1', 'a scalar is one row');
  const viaGet = await app.call('GET', '/rest/v1/rpc/add?a=1&b=2', counted);
  t.equal(viaGet.headers.get('content-range'), '0-0/1', 'GET alike');
  const set = await app.call('POST', '/rest/v1/rpc/author_names', counted);
  t.equal(set.headers.get('content-range'), '0-2/3', 'a set its rows');
  const plain = await post('add', { a: 1, b: 2 });
  t.equal(plain.headers.get('content-range'), null, 'no count asked, no Content-Range');
});

t.test('composite results are objects; void is null', async (t) => {
  const one = await post('first_author');
  t.equal(one.body.name, 'Ursula Le Guin');
  t.same(one.body.tags, ['scifi', 'fantasy']);
  const stats = await get('stats');
  t.same(stats.body, { total: 4, max_pages: 387 }, 'OUT parameters make an object');
  const v = await post('touch');
  t.equal(v.status, 200);
  t.equal(v.text, 'null');
});

t.test('a function with one unnamed json argument takes the whole body', async (t) => {
  const r = await post('raw_body', { anything: [1, 'two'] });
  t.equal(r.status, 200);
  t.same(r.body, { anything: [1, 'two'] });
});

t.test('resolution errors', async (t) => {
  const cases: [() => Promise<{ status: number; body: unknown }>, number, string, string][] = [
    [() => post('nosuch'), 404, 'function not found', 'unknown function'],
    [() => get('nosuch'), 404, 'function not found', 'unknown function (GET)'],
    [() => post('hidden'), 404, 'function not found', 'a function outside public'],
    [() => get('pg_sleep?seconds=1'), 404, 'function not found', 'a pg_catalog function'],
    [() => post('add', { a: 1 }), 400, 'invalid request', 'missing argument'],
    [() => post('add', { a: 1, b: 2, c: 3 }), 400, 'invalid request', 'unknown argument'],
    [() => get('add?a=1&b=2&c=3'), 400, 'invalid request', 'unknown argument (GET)'],
    [() => get('add?a=1&a=2&b=3'), 400, 'invalid request', 'repeated argument (GET)'],
    [() => post('overloaded', { a: 1 }), 400, 'invalid request', 'ambiguous overload'],
    [() => post('add', { a: 'x', b: 1 }), 400, 'invalid request', 'argument of the wrong type'],
    [() => get('add?a=x&b=1'), 400, 'invalid request', 'argument of the wrong type (GET)'],
    [() => post('add', [1, 2]), 400, 'invalid request body', 'an array body'],
  ];
  for (const [fn, status, error, what] of cases) {
    const r = await fn();
    t.equal(r.status, status, what);
    t.same(r.body, { error }, what);
  }
  const unique = await post('overloaded', { b: 1 });
  t.same(unique.body, 'b', 'argument names pick the overload');
});

t.test('EXECUTE is needed: without a grant 403', async (t) => {
  const r = await post('not_granted');
  t.equal(r.status, 403);
  t.same(r.body, { error: 'permission denied' });
  const s = await post('not_granted', undefined, { token: app.serviceKey });
  t.equal(s.status, 403, 'service_role too: default EXECUTE is revoked from PUBLIC');
});

t.test('a raised exception is 500 internal database error, its text never returned', async (t) => {
  const r = await post('fail');
  t.equal(r.status, 500);
  t.same(r.body, { error: 'internal database error' });
  t.notMatch(r.text, /secret/);
});

t.test('invoker functions run as the caller (RLS applies); definer functions as the owner', async (t) => {
  const token = await userToken(USER_A);
  const mine = await post('my_notes', undefined, { token });
  t.same((mine.body as any[]).map((n) => n.body), ['mine']);
  const anon = await post('my_notes');
  t.same(anon.body, [], 'anon sees no private notes');
  const all = await post('all_notes');
  t.equal(all.text, '2', 'the definer function counts every note');
  const write = await post('new_author', { name: 'Via RPC' });
  t.equal(write.status, 200);
  t.equal(write.body.name, 'Via RPC');
  t.equal((await app.db.sql`select count(*)::int as n from public.authors where name = 'Via RPC'`)[0].n, 1);
});

t.test('Cache-Control by volatility, private with a credential', async (t) => {
  const imm = await get('add?a=1&b=1');
  t.equal(imm.headers.get('cache-control'), 'private, max-age=3600', 'IMMUTABLE');
  t.equal(imm.headers.get('vary'), 'Authorization, apikey');
  const stable = await get('greet?name=x');
  t.equal(stable.headers.get('cache-control'), 'private, max-age=60', 'STABLE');
  const vol = await post('touch');
  t.equal(vol.headers.get('cache-control'), null, 'VOLATILE: none');
  t.equal(vol.headers.get('vary'), null);
  const bearer = await app.call('POST', '/rest/v1/rpc/add', { token: app.anonKey, body: { a: 1, b: 2 } });
  t.equal(bearer.headers.get('cache-control'), 'private, max-age=3600', 'POST, Authorization header');
  const err = await post('add', { a: 1 });
  t.equal(err.headers.get('cache-control'), null, 'no caching of errors');
  const cors = await app.call('GET', '/rest/v1/rpc/add?a=1&b=1', { apikey: app.anonKey, headers: { origin: 'http://localhost:3000' } });
  t.equal(cors.headers.get('vary'), 'Origin, Authorization, apikey', 'Vary keeps Origin');
});

t.test('Cache-Control without any credential (development mode) is public', async (t) => {
  const dev = await startApp(t, { worker: false, env: { JWT_SECRET: undefined } });
  await dev.db.sql.unsafe(SCHEMA_SQL).simple();
  await refresh(dev);
  const pub = await dev.call('GET', '/rest/v1/rpc/add?a=1&b=2');
  t.equal(pub.status, 200);
  t.equal(pub.headers.get('cache-control'), 'public, max-age=3600');
  t.equal(pub.headers.get('vary'), null);
  const stable = await dev.call('POST', '/rest/v1/rpc/greet', { body: { name: 'x' } });
  t.equal(stable.headers.get('cache-control'), 'public, max-age=60');
  const tokenQuery = await dev.call('GET', '/rest/v1/rpc/add?a=1&b=2&token=abc');
  t.equal(tokenQuery.status, 200, 'token is not an argument');
  t.equal(tokenQuery.headers.get('cache-control'), 'private, max-age=3600', 'token query parameter');
  t.equal(tokenQuery.headers.get('vary'), 'Authorization, apikey');
  const cookie = await dev.call('GET', '/rest/v1/rpc/add?a=1&b=2', { headers: { cookie: 'a=1; token=abc' } });
  t.equal(cookie.headers.get('cache-control'), 'private, max-age=3600', 'token cookie');
  const vol = await dev.call('POST', '/rest/v1/rpc/touch');
  t.equal(vol.headers.get('cache-control'), null);
});
