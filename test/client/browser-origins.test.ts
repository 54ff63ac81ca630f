/// <reference lib="dom" />
/**
 * A browser app on another origin, as a new user builds one: a page served from another
 * loopback port signs up, writes, reads and subscribes to a live query. Against a
 * development plinth (no JWT_SECRET) with no origin settings it works; in production the
 * same page is refused, REST and WebSocket alike, until SITE_URL names its origin.
 */
import t, { type Test } from 'tap';
import type { Page } from 'playwright-core';
import { startApp, TEST_JWT_SECRET } from '../helpers/app.ts';
import { PASSWORD, uniqueEmail } from '../auth/helpers.ts';
import { chromiumMissing, launch, openPage, startPages, type PageServer } from './browser.ts';

type W = any;

const SCHEMA = `
create table public.todos (
  id bigint generated always as identity primary key,
  owner uuid not null default auth.uid() references auth.users (id) on delete cascade,
  title text not null
);
alter table public.todos enable row level security;
create policy todos_own on public.todos for all to authenticated using (owner = auth.uid()) with check (owner = auth.uid());
grant select, insert, update, delete on public.todos to authenticated;
select live.subscribe('todo_titles', 'select title from public.todos');
`;

interface Outcome {
  signUp: string;
  insert: string;
  read: string;
  live: string;
}

/** In the page: sign up, insert, read back, then subscribe and see a second insert arrive. */
function scenario(page: Page, email: string): Promise<Outcome> {
  return page.evaluate(
    async ({ email, password }) => {
      const c = (window as W).client;
      const describe = (r: { error: { message: string } | null; data: unknown }) => (r.error ? `error: ${r.error.message}` : JSON.stringify(r.data));
      const out = { signUp: '', insert: '', read: '', live: '' };
      const su = await c.auth.signUp({ email, password });
      out.signUp = su.error ? `error: ${su.error.message}` : 'ok';
      out.insert = describe(await c.from('todos').insert({ title: 'first' }).select('title'));
      out.read = describe(await c.from('todos').select('title'));
      out.live = await new Promise<string>((resolve) => {
        const q = c.live('todo_titles', { refetch: () => c.from('todos').select('title') });
        const done = (s: string) => {
          q.close();
          resolve(s);
        };
        q.on('error', (e: { message: string }) => done(`error: ${e.message}`));
        q.on('status', async (s: string) => {
          if (s === 'subscribed') await c.from('todos').insert({ title: 'second' });
        });
        q.on('change', (rows: { title: string }[]) => {
          if (rows.some((r) => r.title === 'second')) done('second arrived');
        });
        setTimeout(() => done('no answer'), 20_000);
      });
      return out;
    },
    { email, password: PASSWORD },
  );
}

const WORKS: Outcome = { signUp: 'ok', insert: '[{"title":"first"}]', read: '[{"title":"first"}]', live: 'second arrived' };

async function prepare(t: Test, page: PageServer, env: Record<string, string | undefined>) {
  const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '0', ...env } });
  await app.db.sql.unsafe(SCHEMA).simple();
  const refreshed = await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  if (refreshed.status !== 200) throw new Error(`catalog refresh: ${refreshed.status}`);
  page.app = { url: app.url, anonKey: app.anonKey };
  return app;
}

const missing = chromiumMissing();
if (missing) {
  t.plan(0, missing);
} else {
  const [page] = await startPages(t, 1);
  const ctx = await launch(t);

  t.test('development mode, no origin settings: the page signs up, writes, reads and subscribes', async (t) => {
    await prepare(t, page, { JWT_SECRET: undefined, SITE_URL: undefined, ALLOWED_ORIGINS: undefined });
    const tab = await openPage(ctx, page.origin);
    t.same(await scenario(tab, uniqueEmail('dev')), WORKS);
    await tab.close();
  });

  t.test('production: refused until SITE_URL names the page, then REST and WebSocket work', async (t) => {
    await prepare(t, page, { JWT_SECRET: TEST_JWT_SECRET, SITE_URL: 'https://app.example.com', ALLOWED_ORIGINS: undefined });
    let tab = await openPage(ctx, page.origin);
    const before = await scenario(tab, uniqueEmail('prod'));
    t.match(before.signUp, /^error: /, 'sign-up refused by CORS');
    t.match(before.insert, /^error: /, 'REST refused by CORS');
    t.match(before.live, /^error: .*connection failed/, 'WebSocket refused');
    await tab.close();

    await prepare(t, page, { JWT_SECRET: TEST_JWT_SECRET, SITE_URL: page.origin, ALLOWED_ORIGINS: undefined });
    tab = await openPage(ctx, page.origin);
    t.same(await scenario(tab, uniqueEmail('prod')), WORKS, 'SITE_URL names the page: everything works');
    await tab.close();
  });
}
