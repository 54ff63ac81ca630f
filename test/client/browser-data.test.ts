/// <reference lib="dom" />
/**
 * The client library's data calls in a real browser (issue 16 §7): REST insert and select
 * under RLS through postgrest-js's builder, rpc (POST and GET), batch with `ref()`
 * templates, errors as `{data: null, error}` with the service's message, and CORS: a page
 * from an origin listed in ALLOWED_ORIGINS passes its preflights, one from an unlisted
 * origin does not.
 */
import t from 'tap';
import type { Page } from 'playwright-core';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, uniqueEmail } from '../auth/helpers.ts';
import { chromiumMissing, launch, openPage, startPages } from './browser.ts';

type W = any;

const SCHEMA = `
create table public.todos (
  id bigint generated always as identity primary key,
  owner uuid not null default auth.uid() references auth.users (id) on delete cascade,
  title text not null,
  done boolean not null default false
);
alter table public.todos enable row level security;
create policy todos_own on public.todos for all to authenticated using (owner = auth.uid()) with check (owner = auth.uid());
grant select, insert, update, delete on public.todos to authenticated;
create table public.vault (id int primary key, secret text);
insert into public.vault values (1, 'hidden');
create function public.add(a int, b int) returns int language sql immutable as $$ select a + b $$;
grant execute on function public.add(int, int) to anon, anonymous, authenticated;
create function public.my_todo_count() returns bigint language sql stable as $$ select count(*) from public.todos $$;
grant execute on function public.my_todo_count() to authenticated;
`;

const missing = chromiumMissing();
if (missing) {
  t.plan(0, missing);
} else {
  await run();
}

async function signUp(page: Page, email: string) {
  return page.evaluate(
    async ({ email, password }) => {
      const { data, error } = await (window as W).client.auth.signUp({ email, password });
      return { id: data?.user?.id as string, error };
    },
    { email, password: PASSWORD },
  );
}

async function run() {
  const [site, allowed, other] = await startPages(t, 3);
  const app = await startApp(t, {
    worker: false,
    env: { SITE_URL: site.origin, ALLOWED_ORIGINS: allowed.origin, AUTH_RATE_LIMIT: '0' },
  });
  await app.db.sql.unsafe(SCHEMA).simple();
  const refreshed = await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  if (refreshed.status !== 200) throw new Error(`catalog refresh: ${refreshed.status}`);
  for (const s of [site, allowed, other]) s.app = { url: app.url, anonKey: app.anonKey };
  const ctx = await launch(t);
  const alice = uniqueEmail('alice');
  const bob = uniqueEmail('bob');

  await t.test('REST insert and select under RLS', async (t) => {
    const a = await openPage(ctx, site.origin);
    const b = await openPage(ctx, site.origin);
    const anon = await openPage(ctx, site.origin);
    const ua = await signUp(a, alice);
    const ub = await signUp(b, bob);
    t.equal(ua.error, null);
    t.equal(ub.error, null);

    const ins = await a.evaluate(async () => {
      const c = (window as W).client;
      return c.from('todos').insert([{ title: 'milk' }, { title: 'bread' }]).select('title, owner');
    });
    t.equal(ins.error, null);
    t.equal(ins.status, 201);
    t.same(ins.data, [
      { title: 'milk', owner: ua.id },
      { title: 'bread', owner: ua.id },
    ], 'owner defaults to auth.uid() of the page session');
    await b.evaluate(() => (window as W).client.from('todos').insert({ title: 'bob only' }));

    const mine = await a.evaluate(() => (window as W).client.from('todos').select('title').order('id'));
    t.same(mine.data, [{ title: 'milk' }, { title: 'bread' }], 'alice sees her rows only');
    const his = await b.evaluate(() => (window as W).client.from('todos').select('title'));
    t.same(his.data, [{ title: 'bob only' }], 'bob sees his rows only');
    const counted = await a.evaluate(() => (window as W).client.from('todos').select('*', { count: 'exact', head: true }));
    t.equal(counted.count, 2);

    const forged = await b.evaluate((owner) => (window as W).client.from('todos').insert({ title: 'forged', owner }), ua.id);
    t.equal(forged.data, null);
    t.equal(forged.status, 403);
    t.equal(forged.error.message, 'permission denied', 'RLS with check: the service message');

    const upd = await a.evaluate(() => (window as W).client.from('todos').update({ done: true }).eq('title', 'milk').select('title, done'));
    t.same(upd.data, [{ title: 'milk', done: true }]);
    const touched = await b.evaluate(() => (window as W).client.from('todos').update({ done: true }).eq('title', 'milk').select('title'));
    t.same(touched.data, [], 'bob cannot touch alice\'s row');

    const anonRead = await anon.evaluate(() => (window as W).client.from('todos').select('*'));
    t.same({ status: anonRead.status, message: anonRead.error?.message }, { status: 403, message: 'permission denied' }, 'anon has no grant');
    const vault = await a.evaluate(() => (window as W).client.from('vault').select('*'));
    t.same({ status: vault.status, message: vault.error?.message }, { status: 403, message: 'permission denied' });
    const unknown = await a.evaluate(() => (window as W).client.from('nope').select('*'));
    t.same({ status: unknown.status, message: unknown.error?.message }, { status: 404, message: 'relation not found' });
    for (const p of [a, b, anon]) await p.close();
  });

  await t.test('rpc: POST and GET, under the caller\'s role', async (t) => {
    const page = await openPage(ctx, site.origin);
    const r = await page.evaluate(
      async ({ email, password }) => {
        const c = (window as W).client;
        const anonAdd = await c.rpc('add', { a: 2, b: 3 });
        const getAdd = await c.rpc('add', { a: 4, b: 5 }, { get: true });
        const anonCount = await c.rpc('my_todo_count');
        await c.auth.signInWithPassword({ email, password });
        const count = await c.rpc('my_todo_count');
        const missing = await c.rpc('nope');
        return {
          anonAdd: anonAdd.data,
          getAdd: getAdd.data,
          anonCount: { status: anonCount.status, message: anonCount.error?.message },
          count: count.data,
          missing: { status: missing.status, message: missing.error?.message },
        };
      },
      { email: alice, password: PASSWORD },
    );
    t.same(r, {
      anonAdd: 5,
      getAdd: 9,
      anonCount: { status: 403, message: 'permission denied' },
      count: 2,
      missing: { status: 404, message: 'function not found' },
    });
    await page.close();
  });

  await t.test('batch with ref() templates; atomic failure rolls back', async (t) => {
    const page = await openPage(ctx, site.origin);
    const r = await page.evaluate(
      async ({ email, password }) => {
        const { createClient, ref } = (window as W).plinth;
        const c = (window as W).client;
        await c.auth.signInWithPassword({ email, password });
        const ok = await c.batch([
          { id: 'todo', method: 'POST', path: 'todos', body: { title: 'from batch' } },
          { id: 'done', method: 'PATCH', path: '/rest/v1/todos', query: { id: `eq.${ref('todo', 'id')}`, select: 'title,done' }, body: { done: true } },
          { id: 'all', method: 'GET', path: 'todos', query: 'select=id&order=id' },
          { id: 'mine', method: 'GET', path: 'todos', query: { id: `in.(${ref('all', '*', 'id')})`, select: 'title', order: 'id' } },
        ]);
        const failed = await c.batch([
          { id: 'first', method: 'POST', path: 'todos', body: { title: 'rolled back' } },
          { id: 'bad', method: 'POST', path: 'vault', body: { id: 2, secret: 'x' } },
        ]);
        const partial = await c.batch(
          [
            { id: 'kept', method: 'POST', path: 'todos', body: { title: 'kept' } },
            { id: 'bad', method: 'POST', path: 'vault', body: { id: 3, secret: 'x' } },
          ],
          { atomic: false },
        );
        const titles = await c.from('todos').select('title').order('id');
        void createClient;
        return {
          ok: ok.data,
          failed: failed.error && { message: failed.error.message, status: failed.error.status, failedOp: failed.error.body.failed_operation },
          partial: partial.data && { status: partial.data.status, statuses: partial.data.results.map((x: any) => x.status) },
          titles: titles.data.map((x: any) => x.title),
        };
      },
      { email: alice, password: PASSWORD },
    );
    t.equal(r.ok.status, 200);
    t.same(r.ok.results.map((x: any) => x.id), ['todo', 'done', 'all', 'mine']);
    t.same(r.ok.results[1].data, [{ title: 'from batch', done: true }], 'the template carried the new id');
    t.same(r.ok.results[3].data, [{ title: 'milk' }, { title: 'bread' }, { title: 'from batch' }], '{{all.*.id}} in in.()');
    t.same(r.failed, { message: 'operation bad failed: permission denied', status: 422, failedOp: 'bad' });
    t.same(r.partial, { status: 207, statuses: [201, 403] });
    t.same(r.titles, ['milk', 'bread', 'from batch', 'kept'], 'atomic failure left nothing behind');
    await page.close();
  });

  await t.test('CORS: a listed origin passes its preflights, an unlisted one is blocked', async (t) => {
    const page = await openPage(ctx, allowed.origin);
    const seen: { url: string; allow: string | undefined }[] = [];
    page.on('response', (res) => {
      if (res.url().startsWith(app.url)) seen.push({ url: res.url(), allow: res.headers()['access-control-allow-origin'] });
    });
    const r = await page.evaluate(
      async ({ email, password }) => {
        const c = (window as W).client;
        const signIn = await c.auth.signInWithPassword({ email, password });
        const rows = await c.from('todos').select('title').eq('done', true).order('id');
        const upd = await c.from('todos').update({ done: false }).eq('title', 'kept').select('title');
        return { signIn: signIn.error, rows: rows.data, upd: upd.data };
      },
      { email: alice, password: PASSWORD },
    );
    t.same(r, { signIn: null, rows: [{ title: 'milk' }, { title: 'from batch' }], upd: [{ title: 'kept' }] });
    t.ok(seen.length >= 3);
    t.ok(seen.every((s) => s.allow === allowed.origin), 'every answer allows the listed origin');

    // The preflight itself, as the browser sends it.
    const pre = await fetch(`${app.url}/rest/v1/todos`, {
      method: 'OPTIONS',
      headers: { origin: allowed.origin, 'access-control-request-method': 'PATCH', 'access-control-request-headers': 'authorization,apikey,content-type,prefer' },
    });
    t.equal(pre.status, 204);
    t.equal(pre.headers.get('access-control-allow-origin'), allowed.origin);
    t.match(pre.headers.get('access-control-allow-headers') ?? '', /authorization/);

    const blocked = await openPage(ctx, other.origin);
    const b = await blocked.evaluate(
      async ({ email, password }) => {
        const c = (window as W).client;
        const signIn = await c.auth.signInWithPassword({ email, password });
        const rows = await c.from('todos').select('title').retry(false);
        return { signIn: signIn.error && signIn.error.status, rows: rows.data, rowsStatus: rows.status };
      },
      { email: alice, password: PASSWORD },
    );
    t.same(b, { signIn: 0, rows: null, rowsStatus: 0 }, 'an unlisted origin gets no answer it may read');
    await page.close();
    await blocked.close();
  });
}
