/**
 * The plv8 runtime (contract §6, issue 14 item 5): `public.<name>(payload jsonb)` runs as
 * the calling role on REST's request path, and its JSON result comes back; the §7.2 error
 * mapping applies. plv8 is not packaged here: plpgsql and SQL functions prove the path
 * (the call does not depend on the language).
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { userToken, USER_A, USER_B } from '../rest/helpers.ts';
import { waitFor } from './helpers.ts';

const db = await createTestDatabase(t);
await db.sql.unsafe(`
  create table public.fn_notes (id serial primary key, owner uuid not null, body text not null unique);
  alter table public.fn_notes enable row level security;
  create policy fn_notes_own on public.fn_notes for all to authenticated using (owner = auth.uid()) with check (owner = auth.uid());
  grant select, insert on public.fn_notes to authenticated;
  grant select on public.fn_notes to anon;
  grant usage on sequence public.fn_notes_id_seq to authenticated;
  insert into public.fn_notes (owner, body) values ('${USER_A}', 'a1'), ('${USER_A}', 'a2'), ('${USER_B}', 'b1');

  -- plpgsql, under RLS: who runs it, what it sees, what it was given.
  create function public.my_notes(payload jsonb) returns jsonb language plpgsql as $$
  begin
    return jsonb_build_object(
      'role', current_user,
      'sub', auth.uid(),
      'bodies', (select coalesce(jsonb_agg(body order by body), '[]') from public.fn_notes),
      'payload', payload);
  end $$;
  grant execute on function public.my_notes(jsonb) to anon, authenticated;

  create function public.add_note(payload jsonb) returns jsonb language plpgsql as $$
  declare v_row public.fn_notes;
  begin
    insert into public.fn_notes (owner, body) values (auth.uid(), payload ->> 'body') returning * into v_row;
    return to_jsonb(v_row);
  end $$;
  grant execute on function public.add_note(jsonb) to authenticated;

  create function public.boom(payload jsonb) returns int language plpgsql as $$
  begin raise exception 'secret detail %', payload; end $$;
  grant execute on function public.boom(jsonb) to anon;

  create function public.ungranted(payload jsonb) returns int language sql as 'select 1';

  create function public.numbers(payload jsonb) returns setof int language sql as
    'select generate_series(1, (payload ->> ''n'')::int)';
  grant execute on function public.numbers(jsonb) to anon;

  create function public.nothing(payload jsonb) returns void language sql as 'select';
  grant execute on function public.nothing(jsonb) to anon;

  create function public.wrong_args(x int) returns int language sql as 'select x';
  grant execute on function public.wrong_args(int) to anon;

  insert into edge.functions (name, runtime, verify_jwt) values
    ('my_notes', 'plv8', true), ('add_note', 'plv8', true), ('boom', 'plv8', true), ('ungranted', 'plv8', true),
    ('numbers', 'plv8', true), ('nothing', 'plv8', true), ('wrong_args', 'plv8', true), ('missing', 'plv8', true);
  insert into edge.functions (name, runtime, verify_jwt) values ('my_notes_open', 'plv8', false);
`);
await db.sql.unsafe(`
  create function public.my_notes_open(payload jsonb) returns jsonb language sql as
    $$ select jsonb_build_object('role', current_user, 'n', (select count(*) from public.fn_notes)) $$;
  grant execute on function public.my_notes_open(jsonb) to anon, authenticated;
`);
const app = await startApp(t, { db });
const tokenA = await userToken(USER_A);
const post = (name: string, body: unknown, opts: { token?: string; apikey?: string } = { apikey: app.anonKey }) =>
  app.call('POST', `/functions/v1/${name}`, { ...opts, body });

t.test('runs as the calling role, under RLS, with the body as payload', async (t) => {
  const a = await post('my_notes', { q: [1, 'two'] }, { token: tokenA });
  t.equal(a.status, 200);
  t.match(a.headers.get('content-type'), /^application\/json/);
  t.same(a.body, { role: 'authenticated', sub: USER_A, bodies: ['a1', 'a2'], payload: { q: [1, 'two'] } }, "user A sees A's rows only");
  const anon = await post('my_notes', { x: 1 });
  t.same(anon.body, { role: 'anon', sub: null, bodies: [], payload: { x: 1 } }, 'anon sees none (no policy for anon)');
  const g = await app.call('GET', '/functions/v1/my_notes?a=1&b=two', { token: tokenA });
  t.equal(g.status, 200);
  t.same(g.body.payload, { a: '1', b: 'two' }, 'GET: the query string as the payload');
  const empty = await app.call('POST', '/functions/v1/my_notes', { token: tokenA });
  t.same(empty.body.payload, {}, 'no body: {}');
  const scalar = await post('my_notes', 42, { token: tokenA });
  t.same(scalar.body.payload, 42, 'any JSON value is a payload');
});

t.test('the same result as RPC of the same function', async (t) => {
  const viaFn = await post('my_notes', { k: 'v' }, { token: tokenA });
  const viaRpc = await app.call('POST', '/rest/v1/rpc/my_notes', { token: tokenA, body: { payload: { k: 'v' } } });
  t.equal(viaRpc.status, 200);
  t.same(viaFn.body, viaRpc.body);
});

t.test('writes commit as the caller; RLS checks them', async (t) => {
  const ok = await post('add_note', { body: 'a3' }, { token: tokenA });
  t.equal(ok.status, 200);
  t.equal(ok.body.owner, USER_A);
  const [row] = await db.sql`select owner::text from public.fn_notes where body = 'a3'`;
  t.equal(row.owner, USER_A, 'committed');
  const dup = await post('add_note', { body: 'a3' }, { token: tokenA });
  t.equal(dup.status, 409, 'unique violation: 409');
  t.same(dup.body, { error: 'duplicate value violates unique constraint' });
});

t.test('the §7.2 error mapping; exception text never returned', async (t) => {
  const boom = await post('boom', { secret: 'x' });
  t.equal(boom.status, 500);
  t.same(boom.body, { error: 'internal database error' });
  t.notMatch(boom.text, /secret/);
  const denied = await post('ungranted', {});
  t.equal(denied.status, 403);
  t.same(denied.body, { error: 'permission denied' });
  const anonWrite = await post('add_note', { body: 'x' });
  t.equal(anonWrite.status, 403, 'anon has no EXECUTE on add_note');
  const badInput = await post('numbers', { n: 'many' });
  t.equal(badInput.status, 400, 'a data exception: 400');
  t.same(badInput.body, { error: 'invalid request' });
});

t.test('result shapes as RPC: a set is an array, void is null', async (t) => {
  t.same((await post('numbers', { n: 3 })).body, [1, 2, 3]);
  t.same((await post('numbers', { n: 1 })).body, [1], 'an array even for one row');
  const v = await post('nothing', {});
  t.equal(v.status, 200);
  t.equal(v.text, 'null');
});

t.test('a plv8 row without public.<name>(jsonb): 404', async (t) => {
  for (const name of ['missing', 'wrong_args']) {
    const r = await post(name, {});
    t.equal(r.status, 404, name);
    t.same(r.body, { error: 'function not found' });
  }
});

t.test('bad bodies: 400 invalid request body, 413 too large', async (t) => {
  const bad = await app.call('POST', '/functions/v1/my_notes', { token: tokenA, raw: '{not json', headers: { 'content-type': 'application/json' } });
  t.equal(bad.status, 400);
  t.same(bad.body, { error: 'invalid request body' });
  const type = await app.call('POST', '/functions/v1/my_notes', { token: tokenA, raw: '{}', headers: { 'content-type': 'text/plain' } });
  t.equal(type.status, 400, 'not application/json');
  t.same(type.body, { error: 'invalid request body' });
  const big = await app.call('POST', '/functions/v1/my_notes', { token: tokenA, body: { s: 'x'.repeat(1_100_000) } });
  t.equal(big.status, 413);
  t.same(big.body, { error: 'request body too large' });
});

t.test('verify_jwt: true needs a credential; false runs without one as anon', async (t) => {
  const none = await post('my_notes', {}, {});
  t.equal(none.status, 401);
  t.same(none.body, { error: 'missing credentials' });
  const open = await post('my_notes_open', {}, {});
  t.equal(open.status, 200);
  t.same(open.body, { role: 'anon', n: 0 });
  const openUser = await post('my_notes_open', {}, { token: tokenA });
  t.equal(openUser.body.role, 'authenticated', 'a credential that verifies still sets the role');
  t.ok(openUser.body.n >= 2);
});

t.test('a function created after the row: the DDL reload picks it up', async (t) => {
  await db.sql`insert into edge.functions (name, runtime) values ('late', 'plv8')`;
  t.equal((await post('late', {})).status, 404, 'no function yet');
  await db.sql.unsafe(`create function public.late(payload jsonb) returns text language sql as $$ select 'here' $$;
    grant execute on function public.late(jsonb) to anon;`);
  t.ok(await waitFor(async () => (await post('late', {})).status === 200), 'callable once created');
  t.equal((await post('late', {})).text, '"here"');
});
