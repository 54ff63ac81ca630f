/**
 * The request lanes cannot change role on the `/functions/v1/` plv8 path either (issue 11;
 * RPC and batch are in test/core/lanes.test.ts): a `public.<name>(payload jsonb)` function
 * (SECURITY INVOKER) called as anon that does set_config('role', …), `execute 'set role …'`
 * or `reset role` becomes neither the owner nor service_role; each attempt fails with the
 * mapped error RPC gives (403 permission denied) and reads nothing. The same functions run
 * by the owner do read the secrets, so the assertions can fail.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';

const db = await createTestDatabase(t);
const [{ owner }] = await db.sql<{ owner: string }[]>`select current_user as owner`;

const body = (name: string, prelude: string, read: string) => `
  create function public.${name}(payload jsonb) returns jsonb language plpgsql security invoker as $f$
  begin
    ${prelude};
    return (${read});
  end $f$;`;
const OWNER_READ = `select coalesce(jsonb_agg(secret), '[]') from public.owner_only`;
const HIDDEN_READ = `select coalesce(jsonb_agg(body), '[]') from public.hidden`;

const ESCAPES = {
  fn_become_owner: [`perform pg_catalog.set_config('role', '${owner}', true)`, OWNER_READ],
  fn_become_service: [`perform pg_catalog.set_config('role', 'service_role', true)`, HIDDEN_READ],
  fn_exec_set_role_owner: [`execute 'set role ${owner}'`, OWNER_READ],
  fn_exec_set_role_service: [`execute 'set role service_role'`, HIDDEN_READ],
  fn_reset_then_owner: [`reset role`, OWNER_READ],
} as const;
const OTHERS = {
  fn_reset_then_hidden: [`reset role`, HIDDEN_READ],
  fn_become_login_role: [`perform pg_catalog.set_config('role', session_user, true)`, HIDDEN_READ],
  fn_open_become_owner: [`perform pg_catalog.set_config('role', '${owner}', true)`, OWNER_READ],
} as const;
const ALL = { ...ESCAPES, ...OTHERS };

await db.sql.unsafe(`
  create table public.owner_only (secret text);
  insert into public.owner_only values ('owner secret');
  create table public.hidden (id int primary key, body text);
  alter table public.hidden enable row level security;
  grant select on public.hidden to anon, authenticated, service_role;
  insert into public.hidden values (1, 'hidden row');
  ${Object.entries(ALL).map(([name, [prelude, read]]) => body(name, prelude, read)).join('\n')}
  grant execute on all functions in schema public to anon, authenticated;
  insert into edge.functions (name, runtime, verify_jwt) values
    ${Object.keys(ALL).map((name) => `('${name}', 'plv8', ${name !== 'fn_open_become_owner'})`).join(',\n    ')};
`);
const app = await startApp(t, { db });
const post = (name: string, opts: { apikey?: string } = { apikey: app.anonKey }) =>
  app.call('POST', `/functions/v1/${name}`, { ...opts, body: { x: 1 } });

t.test('sanity: run by the owner, each function reads its secret (the test can fail)', async (t) => {
  for (const [name, [, read]] of Object.entries(ALL)) {
    // In a transaction rolled back: a plain `set role` would outlast the call on this connection.
    let result: unknown;
    await db.sql
      .begin(async (c) => {
        [{ result }] = await c.unsafe(`select public.${name}('{}') as result`);
        throw new Error('rollback');
      })
      .catch((e: Error) => {
        if (e.message !== 'rollback') throw e;
      });
    t.same(result, [read === OWNER_READ ? 'owner secret' : 'hidden row'], `${name}: reads the secret as the owner`);
  }
});

t.test('/functions/v1/ as anon: no way to the owner or to service_role', async (t) => {
  for (const name of Object.keys(ESCAPES)) {
    const r = await post(name);
    t.equal(r.status, 403, `${name}: 403`);
    t.same(r.body, { error: 'permission denied' }, `${name}: the mapped message`);
    t.notMatch(r.text, /owner secret|hidden row/, `${name}: nothing read`);
  }
  const reset = await post('fn_reset_then_hidden');
  t.equal(reset.status, 200, 'reset role leaves anon: allowed, but ...');
  t.same(reset.body, [], '... it reads nothing RLS hides');
  const login = await post('fn_become_login_role');
  t.equal(login.status, 403, 'the lane login role itself holds no privilege');
  t.same(login.body, { error: 'permission denied' });
  t.notMatch(login.text, /hidden row/);
});

t.test('verify_jwt false, no credential at all (anon): no way to the owner', async (t) => {
  for (const opts of [{}, { apikey: app.anonKey }]) {
    const r = await post('fn_open_become_owner', opts);
    t.equal(r.status, 403, `${opts.apikey ? 'anon key' : 'no credential'}: 403`);
    t.same(r.body, { error: 'permission denied' });
    t.notMatch(r.text, /owner secret/);
  }
});

t.test('the same answers as RPC of the same functions', async (t) => {
  for (const name of Object.keys(ALL)) {
    const viaFn = await post(name);
    const viaRpc = await app.call('POST', `/rest/v1/rpc/${name}`, { apikey: app.anonKey, body: { payload: { x: 1 } } });
    t.same([viaFn.status, viaFn.body], [viaRpc.status, viaRpc.body], `${name}: ${viaRpc.status}`);
  }
});
