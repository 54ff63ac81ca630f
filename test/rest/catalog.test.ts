/**
 * The schema cache (issue 4 §1; interface §4.10): POST /api/catalog/refresh (service_role,
 * 200 {ok: true}) and the automatic reload after DDL through the event trigger's NOTIFY,
 * without a restart, on every instance sharing the database.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { userToken, USER_A } from './helpers.ts';

/** Polls until `check` holds (the NOTIFY arrives asynchronously). */
async function eventually(check: () => Promise<boolean>, ms = 5000): Promise<boolean> {
  const until = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('POST /api/catalog/refresh needs service_role and answers {ok: true}', async (t) => {
  const app = await startApp(t, { worker: false });
  const none = await app.call('POST', '/api/catalog/refresh');
  t.equal(none.status, 401);
  t.same(none.body, { error: 'missing credentials' });
  const anon = await app.call('POST', '/api/catalog/refresh', { apikey: app.anonKey });
  t.equal(anon.status, 403);
  t.same(anon.body, { error: 'service role required' });
  const user = await app.call('POST', '/api/catalog/refresh', { token: await userToken(USER_A) });
  t.equal(user.status, 403);
  const ok = await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  t.equal(ok.status, 200);
  t.same(ok.body, { ok: true });
});

t.test('a refresh makes a new table visible at once', async (t) => {
  const app = await startApp(t, { worker: false });
  // Set up and refresh before the event trigger's notification can be awaited.
  await app.db.sql.unsafe(`create table public.fresh (id int primary key); grant select on public.fresh to anon; insert into public.fresh values (7);`).simple();
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  const r = await app.call('GET', '/rest/v1/fresh', { apikey: app.anonKey });
  t.equal(r.status, 200);
  t.same(r.body, [{ id: 7 }]);
});

t.test('DDL reloads the catalog on every instance without a refresh', async (t) => {
  const a = await startApp(t, { worker: false });
  const b = await startApp(t, { worker: false, db: a.db });
  const status = (app: typeof a, path: string) => app.call('GET', path, { apikey: app.anonKey }).then((r) => r.status);

  t.equal(await status(a, '/rest/v1/gadgets'), 404, 'not there yet');
  await a.db.sql.unsafe(`create table public.gadgets (id int primary key); grant select on public.gadgets to anon; insert into public.gadgets values (1);`).simple();
  t.ok(await eventually(async () => (await status(a, '/rest/v1/gadgets')) === 200), 'created: instance a serves it');
  t.ok(await eventually(async () => (await status(b, '/rest/v1/gadgets')) === 200), 'instance b too');

  await a.db.sql`alter table public.gadgets add column label text default 'new'`;
  t.ok(
    await eventually(async () => (await a.call('GET', '/rest/v1/gadgets?select=label', { apikey: a.anonKey })).status === 200),
    'a new column becomes selectable',
  );
  const r = await a.call('GET', '/rest/v1/gadgets?select=id,label', { apikey: a.anonKey });
  t.same(r.body, [{ id: 1, label: 'new' }]);

  await a.db.sql`create function public.gadget_count() returns bigint language sql stable as 'select count(*) from public.gadgets'`;
  await a.db.sql`grant execute on function public.gadget_count() to anon`;
  t.ok(await eventually(async () => (await status(b, '/rest/v1/rpc/gadget_count')) === 200), 'a new function is callable');

  await a.db.sql`drop table public.gadgets cascade`;
  t.ok(await eventually(async () => (await status(a, '/rest/v1/gadgets')) === 404), 'dropped: 404 relation not found');
  t.ok(await eventually(async () => (await status(b, '/rest/v1/gadgets')) === 404), 'on instance b too');
});

t.test('a column changed under a cached statement still answers correctly', async (t) => {
  const app = await startApp(t, { worker: false });
  await app.db.sql.unsafe(`create table public.shifty (id int primary key, v int); grant select on public.shifty to anon; insert into public.shifty values (1, 10);`).simple();
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  const path = '/rest/v1/shifty?select=id,v&id=eq.1';
  for (let i = 0; i < 3; i++) t.same((await app.call('GET', path, { apikey: app.anonKey })).body, [{ id: 1, v: 10 }]);
  await app.db.sql`alter table public.shifty alter column v type text using v::text || '!'`;
  t.ok(
    await eventually(async () => JSON.stringify((await app.call('GET', path, { apikey: app.anonKey })).body) === '[{"id":1,"v":"10!"}]'),
    'the prepared statement is re-planned for the new type',
  );
});
