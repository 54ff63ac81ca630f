/// <reference lib="dom" />
/**
 * The dashboard in headless Chromium against a seeded plinth: the first admin made through
 * the setup link, sign-in with an admin account, a refused non-admin, and every view with one
 * action in each (a row inserted, edited and deleted; SQL run; a user created and edited; a bucket made
 * and an image uploaded and previewed; a webhook created and its delivery seen; a function
 * invoked; a live subscriber appearing; a failed request in the logs; the settings), run as
 * `npm run dev` runs the service: a table made with an owner-only policy lands in
 * migrations/current.sql, the watch applies it and REST serves it under the policy; a schedule
 * created, run and paused; the backups with a restore command; every view at 390 px. No
 * console error on the way. Screenshots of every view go to .artifacts/dashboard/ (not
 * committed) for a person to look at.
 */
import { mkdirSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import type { Page } from 'playwright-core';
import WebSocket from 'ws';
import * as OTPAuth from 'otpauth';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, uniqueEmail } from '../auth/helpers.ts';
import { chromiumMissing, launch } from '../client/browser.ts';
import { setupToken } from '../../src/dashboard/index.ts';
import { BACKUP_NAME, ownerOnlyServed, walkFolders, watchApplies } from './walk.ts';

const SHOTS = fileURLToPath(new URL('../../.artifacts/dashboard/', import.meta.url));
const VIEWS = ['Tables', 'SQL', 'Users', 'Storage', 'Webhooks', 'Functions', 'Live', 'Schedules', 'Backups', 'Logs', 'Settings'];
// A 2×2 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==', 'base64');

const missing = chromiumMissing();
if (missing) {
  t.plan(0, missing);
} else {
  await run();
}

async function run() {
  mkdirSync(SHOTS, { recursive: true });
  // A webhook receiver on loopback.
  // A write whose title is `refused` is answered 500 while `refusing` holds (the redelivery step).
  const received: string[] = [];
  let refusing = true;
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push(body);
      res.writeHead(refusing && body.includes('"title":"refused"') ? 500 : 200).end('ok');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => receiver.close(() => r())));
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

  const folders = walkFolders(t, 'chromium');
  const app = await startApp(t, {
    env: { AUTH_RATE_LIMIT: '0', ENABLE_SQL_ENDPOINT: 'true', FUNCTIONS_DIR: '/nonexistent/plinth-functions', WEBHOOK_RETRY_SCHEDULE: '100ms', ...folders.env },
  });
  await app.db.sql
    .unsafe(
      `create table public.todos (id bigint generated always as identity primary key, title text not null, done boolean not null default false);
       alter table public.todos enable row level security;
       create policy todos_read on public.todos for select to authenticated using (true);
       grant select on public.todos to authenticated;
       insert into public.todos (title) values ('seeded');
       create function public.echo(payload jsonb) returns jsonb language sql stable as $$ select jsonb_build_object('got', payload, 'role', auth.role()) $$;
       grant execute on function public.echo(jsonb) to anon, service_role;
       create table public.kinds (id bigint generated always as identity primary key, data jsonb, tags text[], at timestamptz, note text default 'none');
       create function public.ping(p jsonb) returns void language sql as $$ select null::void $$;
       grant execute on function public.ping(jsonb) to service_role;
       insert into edge.functions (name, runtime) values ('echo', 'plv8');
       select live.subscribe('todo_titles', 'select title from public.todos');`,
    )
    .simple();
  for (const path of ['/api/catalog/refresh', '/functions/v1/_refresh']) {
    const r = await app.call('POST', path, { token: app.serviceKey });
    if (r.status !== 200) throw new Error(`${path}: ${r.status}`);
  }
  const ctx = await launch(t);
  const page = await ctx.newPage();
  await page.setViewportSize({ width: 1280, height: 800 });
  const consoleErrors: string[] = [];
  page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
  page.on('pageerror', (e) => consoleErrors.push(e.message));
  // Which address a "Failed to load resource" names: the console message does not say.
  const failedLoads: string[] = [];
  page.on('response', (r) => r.status() >= 400 && failedLoads.push(`${r.status()} ${r.request().method()} ${r.url()}`));
  const shot = (name: string) => page.screenshot({ path: `${SHOTS}${name}.png`, fullPage: true });
  const view = async (name: string, heading: string) => {
    await page.getByRole('link', { name: heading, exact: true }).click();
    await page.getByRole('heading', { level: 2, name: heading, exact: true }).waitFor();
  };
  const email = uniqueEmail('admin');

  await t.test('the setup link creates the first admin and signs in', async (t) => {
    const token = await setupToken(app.service.db);
    await page.goto(`${app.url}/_/#/setup?token=${token}`);
    await shot('setup');
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create admin and sign in' }).click();
    await page.getByRole('heading', { level: 2, name: 'Tables' }).waitFor();
    t.ok(await page.getByText(email).isVisible(), 'signed in as the new admin');
  });

  await t.test('Tables: columns, policies, grants; a row inserted, edited and deleted', async (t) => {
    await page.getByRole('button', { name: /^todos/ }).click();
    await page.getByRole('table', { name: 'Policies' }).getByText('todos_read').waitFor();
    t.ok(await page.getByRole('table', { name: 'Grants per API role' }).getByRole('cell', { name: 'select, insert, update, delete', exact: true }).isVisible(), "service_role's grants");
    t.ok(await page.getByText('GET /rest/v1/todos?select=*&limit=50&offset=0').isVisible(), 'the request is shown');
    await page.getByRole('button', { name: 'Insert a row' }).click();
    await page.getByRole('form', { name: 'New row' }).getByLabel(/^title/).fill('from the dashboard');
    await page.getByRole('button', { name: 'Insert', exact: true }).click();
    await page.getByRole('cell', { name: 'from the dashboard', exact: true }).waitFor();
    t.ok(await page.getByText(`insert into public.todos (title) values ('from the dashboard');`).isVisible(), 'the change as SQL (the form sends the fields set, the rest take their defaults)');
    await page.getByRole('button', { name: 'Edit row 2' }).click();
    await page.getByLabel('As JSON').check();
    await page.getByLabel('Edit the row (JSON)').fill('{"title": "edited", "done": true}');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('cell', { name: 'edited', exact: true }).waitFor();
    await shot('tables');
    await page.getByRole('button', { name: 'Delete row 2' }).click();
    await page.getByRole('cell', { name: 'edited', exact: true }).waitFor({ state: 'detached' });
    const rows = await app.db.sql`select title from public.todos order by id`;
    t.same(rows.map((r) => r.title), ['seeded'], 'the database saw every change');
  });

  await t.test('Tables: a row of JSON, an array, a timestamp and a NULL, edited field by field', async (t) => {
    await page.getByRole('button', { name: /^kinds/ }).click();
    await page.getByRole('button', { name: 'Insert a row' }).click();
    const form = page.getByRole('form', { name: 'New row' });
    await form.getByRole('textbox', { name: /^data/ }).fill('{"a": [1, 2], "b": null}');
    await form.getByRole('textbox', { name: /^tags/ }).fill('["x", "y, z"]');
    await form.getByRole('textbox', { name: /^at\b/ }).fill('2026-11-28T09:30:00Z');
    await form.getByLabel('note is NULL').check();
    await page.getByRole('button', { name: 'Insert', exact: true }).click();
    await page.getByRole('cell', { name: '["x","y, z"]', exact: true }).waitFor();
    const [row] = await app.db.sql`select data, tags, at, note from public.kinds`;
    t.same(row, { data: { a: [1, 2], b: null }, tags: ['x', 'y, z'], at: new Date('2026-11-28T09:30:00Z'), note: null }, 'JSON, an array, a timestamp and NULL (not the default) reach the database');
    await page.getByRole('button', { name: /^Edit row / }).click();
    const edit = page.getByRole('form', { name: 'Edit the row' });
    await edit.getByRole('textbox', { name: /^tags/ }).fill('not json');
    await page.getByRole('button', { name: 'Save' }).click();
    await edit.getByRole('alert').getByText('tags: not JSON').waitFor();
    await edit.getByLabel('data is NULL').check();
    await edit.getByRole('textbox', { name: /^tags/ }).fill('[]');
    await page.getByRole('button', { name: 'Save' }).click();
    await edit.waitFor({ state: 'detached' });
    const [after] = await app.db.sql`select data, tags, note from public.kinds`;
    t.same(after, { data: null, tags: [], note: null }, 'set to NULL, an empty array; the untouched field kept');
  });

  await t.test('Tables: a table made with an owner-only policy, as a migration the watch applies; REST serves it', async (t) => {
    await page.getByRole('button', { name: 'New table' }).click();
    const form = page.getByRole('region', { name: 'New table' });
    await form.getByLabel(/^Table name/).fill('journal');
    await form.getByRole('button', { name: 'Add a column' }).click();
    await form.getByRole('group', { name: 'Column 3' }).getByLabel('Name').fill('entry');
    await form.getByRole('group', { name: 'Column 3' }).getByLabel('Type').fill('text');
    t.equal(await form.getByLabel('Row-level security policy').inputValue(), 'owner_only', 'owner only by default');
    await form.getByRole('button', { name: 'Show the SQL' }).click();
    const sql = form.getByLabel('SQL: create journal', { exact: true });
    await sql.waitFor();
    t.match(await sql.textContent(), /create policy journal_owner_only on public\.journal for all to authenticated/, 'the SQL is shown first');
    await shot('tables-new');
    // Read before appending: once the watch applies it, the view moves on to the new table.
    const shown = ((await sql.textContent()) ?? '').trim();
    await form.getByRole('button', { name: /^Append to .*current\.sql$/ }).click();
    const file = await watchApplies(app, folders.migrations, 'create policy journal_owner_only');
    t.ok(shown !== '' && file.includes(shown), 'migrations/current.sql holds the SQL shown');
    await page.getByRole('heading', { level: 3, name: /^public\.journal/ }).waitFor({ timeout: 60_000 });
    t.ok(await page.getByRole('table', { name: 'Policies' }).getByText('journal_owner_only').isVisible(), 'the policy is listed');
    const served = await ownerOnlyServed(app, 'journal', 'entry');
    t.same(served, { own: [{ entry: 'mine' }], other: [] }, "REST serves it: each user sees their own rows only");

    await page.getByRole('combobox', { name: /^Change/ }).selectOption('rename_column');
    await page.getByRole('combobox', { name: /^Column/ }).selectOption('entry');
    await page.getByLabel('New name').fill('body');
    await page.getByRole('button', { name: 'Show the SQL' }).click();
    await page.getByRole('button', { name: /^Append to / }).click();
    await watchApplies(app, folders.migrations, 'rename column entry to body');
    await page.getByRole('table', { name: 'Columns' }).getByRole('cell', { name: 'body', exact: true }).waitFor({ timeout: 60_000 });
    await shot('tables-changed');
    t.pass('a column renamed the same way');
  });

  await t.test('SQL: a statement runs through /api/sql', async (t) => {
    await view('SQL', 'SQL');
    await page.getByLabel(/^Statements/).fill('select 41 + 1 as answer');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.getByRole('cell', { name: '42', exact: true }).waitFor();
    await shot('sql');
    t.pass('42');
  });

  await t.test('Users: a user created, found, edited (metadata, ban) and deleted', async (t) => {
    await view('Users', 'Users');
    const user = uniqueEmail('someone');
    await page.getByLabel('Email', { exact: true }).fill(user);
    await page.getByLabel('Password (optional)').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create user' }).click();
    await page.getByRole('cell', { name: user, exact: true }).waitFor();
    await page.getByLabel('Search by email or id').fill('someone');
    t.equal(await page.getByRole('table', { name: /^Users/ }).getByRole('row').count(), 2, 'the search keeps one user (and the header)');
    const signedIn = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email: user, password: PASSWORD } });
    t.equal(signedIn.status, 200, 'the new user signs in: one session');
    await page.getByRole('button', { name: `Sessions of ${user}` }).click();
    await page.getByRole('button', { name: /^Revoke session / }).click();
    await page.getByRole('cell', { name: 'ended', exact: true }).waitFor();
    await shot('users');
    const refresh = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'refresh_token', refresh_token: signedIn.body.refresh_token } });
    t.equal(refresh.status, 401, 'the revoked session refreshes no more');
    await page.getByRole('button', { name: `Edit ${user}` }).click();
    await page.getByLabel('app_metadata (JSON)').fill('{"plan": "pro"}');
    await page.getByLabel('user_metadata (JSON)').fill('{"name": "Someone"}');
    await page.getByLabel('Ban').selectOption('24h');
    await page.getByRole('button', { name: 'Save user' }).click();
    await page.getByRole('heading', { name: `Edit ${user}` }).waitFor({ state: 'detached' });
    const edited = await app.call('GET', `/auth/v1/admin/users/${signedIn.body.user.id as string}`, { token: app.serviceKey });
    t.same([edited.body.app_metadata.plan, edited.body.user_metadata], ['pro', { name: 'Someone' }], 'the metadata edited');
    t.type(edited.body.banned_until, 'string', 'banned');
    const banned = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email: user, password: PASSWORD } });
    t.same([banned.status, banned.body], [403, { error: 'user is banned' }], 'the banned user signs in no more');
    await page.getByRole('button', { name: `Delete ${user}` }).click();
    await page.getByRole('button', { name: `Really delete ${user}` }).click();
    await page.getByRole('cell', { name: user, exact: true }).waitFor({ state: 'detached' });
  });

  await t.test('Storage: a bucket created, an image uploaded, previewed and deleted', async (t) => {
    await view('Storage', 'Storage');
    await page.getByLabel('New bucket').fill('pictures');
    await page.getByRole('button', { name: 'Create bucket' }).click();
    await page.getByRole('heading', { level: 3, name: 'pictures' }).waitFor();
    await page.getByLabel(/Upload files/).setInputFiles({ name: 'dot.png', mimeType: 'image/png', buffer: PNG });
    await page.getByRole('cell', { name: 'dot.png', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Preview dot.png' }).click();
    const img = page.getByRole('img', { name: 'Preview of dot.png' });
    await img.waitFor();
    await page.waitForFunction(() => (document.querySelector('img.preview') as HTMLImageElement | null)?.naturalWidth === 2);
    await shot('storage');
    t.pass('the preview decoded');
    await page.getByRole('button', { name: 'Delete dot.png' }).click();
    await page.getByRole('cell', { name: 'dot.png', exact: true }).waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Delete bucket pictures' }).click();
    await page.getByRole('button', { name: /^pictures/ }).waitFor({ state: 'detached' });
  });

  await t.test('Webhooks: one created, a write delivered, the delivery in its log', async (t) => {
    await view('Webhooks', 'Webhooks');
    await page.getByLabel('URL').fill(receiverUrl);
    await page.getByLabel(/^Table/).fill('todos');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    await page.getByRole('cell', { name: receiverUrl, exact: true }).waitFor();
    await app.db.sql`insert into public.todos (title) values ('hooked')`;
    const deadline = Date.now() + 30_000;
    while (received.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    t.equal(received.length, 1, 'the receiver got the write');
    await page.getByRole('button', { name: `Deliveries of ${receiverUrl}` }).click();
    const refresh = page.getByRole('button', { name: 'Refresh' });
    await until(page, async () => {
      if (await page.getByRole('cell', { name: 'delivered', exact: true }).count()) return true;
      await refresh.click();
      return false;
    });
    await shot('webhooks');
    t.pass('delivered, in the log');

    // A receiver refusing a write: two attempts (WEBHOOK_RETRY_SCHEDULE 100ms), failed; redelivered once it accepts.
    await app.db.sql`insert into public.todos (title) values ('refused')`;
    await until(page, async () => {
      if (await page.getByRole('cell', { name: 'failed', exact: true }).count()) return true;
      await refresh.click();
      return false;
    });
    t.equal(received.filter((b) => b.includes('"refused"')).length, 2, 'two refused attempts');
    refusing = false;
    await page.getByRole('button', { name: /^Redeliver INSERT of / }).click();
    await until(page, async () => {
      if ((await page.getByRole('cell', { name: 'delivered', exact: true }).count()) === 2) return true;
      await refresh.click();
      return false;
    });
    t.ok(await page.getByRole('cell', { name: /#3 200 in/ }).count(), 'the third attempt, a 200, in the log');
    t.equal(received.filter((b) => b.includes('"refused"')).length, 3, 'the redelivery reached the receiver');
    t.equal(await page.getByRole('button', { name: /^Redeliver / }).count(), 0, 'nothing left to redeliver');
    await shot('webhooks-redelivered');
  });

  await t.test('Functions: the catalog and an invocation', async (t) => {
    await view('Functions', 'Functions');
    await page.getByRole('button', { name: 'Invoke echo' }).click();
    await page.getByLabel('JSON body').fill('{"hello": "dashboard"}');
    await page.getByRole('button', { name: 'Invoke', exact: true }).click();
    await page.getByText('Status 200').waitFor();
    const body = await page.locator('.answer pre').textContent();
    t.same(JSON.parse(body ?? 'null'), { got: { hello: 'dashboard' }, role: 'service_role' });
    await page.getByLabel('Call as').selectOption('anon');
    await page.getByRole('button', { name: 'Invoke', exact: true }).click();
    await page.waitForFunction(() => document.querySelector('.answer pre')?.textContent?.includes('"anon"'), null, { timeout: 5000 }).catch(async () => {
      t.fail(`anon answer: ${await page.locator('.answer').textContent()}`);
    });
    await shot('functions');
  });

  await t.test('Live: a subscriber appears', async (t) => {
    await view('Live', 'Live');
    await page.getByRole('cell', { name: 'todo_titles', exact: true }).first().waitFor();
    const ws = new WebSocket(`${app.url.replace('http', 'ws')}/ws/todo_titles?apikey=${app.serviceKey}`);
    t.teardown(() => ws.close());
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    await page.getByRole('table', { name: /^Open sockets/ }).getByRole('cell', { name: 'todo_titles', exact: true }).waitFor({ timeout: 15_000 });
    await shot('live');
    t.pass('the socket is listed');
  });

  await t.test('Schedules: one created, run now, its run in the log, paused', async (t) => {
    await view('Schedules', 'Schedules');
    await shot('schedules-empty');
    await page.getByLabel('Schedule name').fill('pinger');
    await page.getByLabel(/^Cron/).fill('0 3 * * *');
    await page.getByLabel(/^Target/).fill('sql:public.ping');
    await page.getByRole('button', { name: 'Create schedule' }).click();
    await page.getByRole('table', { name: 'Schedules' }).getByRole('cell', { name: 'pinger', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Run pinger now' }).click();
    const refresh = page.getByRole('button', { name: 'Refresh' });
    await until(page, async () => {
      if (await page.getByRole('table', { name: /^Runs/ }).getByRole('cell', { name: 'succeeded', exact: true }).count()) return true;
      await refresh.click();
      return false;
    });
    t.ok(await page.getByRole('table', { name: /^Runs/ }).getByRole('cell', { name: /^\d+ ms$/ }).first().isVisible(), 'with its duration');
    await page.getByRole('button', { name: 'Pause pinger' }).click();
    await page.getByRole('table', { name: 'Schedules' }).getByRole('cell', { name: 'paused', exact: true }).waitFor();
    await page.getByLabel('Outcome').selectOption('failed');
    await page.getByText('No run matches these filters.').waitFor();
    await page.getByLabel('Outcome').selectOption('');
    await shot('schedules');
    const [row] = await app.db.sql`select paused from plinth_private.schedules where name = 'pinger'`;
    t.equal(row.paused, true, 'paused in the database');
  });

  await t.test('Backups: the base backups, the WAL archive and a restore command', async (t) => {
    await view('Backups', 'Backups');
    await page.getByRole('table', { name: /^Base backups/ }).getByRole('cell', { name: BACKUP_NAME, exact: true }).waitFor();
    t.ok(await page.getByRole('table', { name: 'WAL archive' }).getByRole('cell', { name: '32.0 kB', exact: true }).isVisible(), 'the archive and its size');
    await page.getByLabel(/^Restore to/).fill('2026-11-28T03:30:00Z');
    const commands = await page.getByLabel('Restore commands', { exact: true }).textContent();
    t.ok(commands?.includes(`BACKUP_DIR=${folders.backups} npm run restore -- --to '2026-11-28T03:30:00Z' --into /var/lib/plinth-restored`), commands ?? '');
    await shot('backups');
  });

  await t.test('Logs: the app apart from the dashboard, a failed request and its detail, the chart', async (t) => {
    const failed = await app.call('GET', '/rest/v1/no_such_table', { token: app.serviceKey, headers: { 'x-request-id': 'app-request-0123456789' } });
    t.equal(failed.status, 404);
    await view('Logs', 'Logs');
    await page.getByRole('img', { name: /^Last hour: \d+ requests/ }).waitFor();
    await page.getByLabel('Status').selectOption('4xx');
    await page.getByRole('cell', { name: /no_such_table/ }).first().waitFor();
    t.equal(await page.getByRole('cell', { name: '/api/tables', exact: true }).count(), 0, "the dashboard's own requests are not among the app's");
    await page.getByRole('button', { name: 'Request app-request-0123456789' }).click();
    await page.getByRole('heading', { level: 3, name: /GET \/rest\/v1\/no_such_table/ }).waitFor();
    t.ok(await page.getByText('app-request-0123456789', { exact: true }).isVisible(), 'the full id in the detail');
    await shot('logs');
    await page.getByRole('button', { name: "The dashboard's own" }).click();
    await page.getByLabel('Status').selectOption('');
    await page.getByRole('cell', { name: '/api/tables', exact: true }).first().waitFor();
    await shot('logs-dashboard');
    t.pass("the dashboard's own requests, apart");
  });

  await t.test('Settings: read-only configuration', async (t) => {
    await view('Settings', 'Settings');
    await page.getByRole('table', { name: 'Features' }).waitFor();
    t.ok(await page.getByRole('cell', { name: '0.1.0', exact: true }).isVisible(), 'the version');
    t.notOk((await page.content()).includes(app.serviceKey), 'no secret on the page');
    await shot('settings');
  });

  await t.test('every view reachable at 390 px wide, none scrolling sideways', async (t) => {
    await page.setViewportSize({ width: 390, height: 800 });
    for (const name of VIEWS) {
      const link = page.getByRole('link', { name, exact: true });
      t.ok(await link.isVisible(), `${name}: its link is on the screen`);
      const box = await link.boundingBox();
      t.ok(box !== null && box.x >= 0 && box.x + box.width <= 390, `${name}: its link is within the width`);
      await view(name, name);
      await page.waitForLoadState('networkidle');
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      t.ok(overflow <= 0, `${name}: no horizontal scroll of the page (${overflow} px)`);
      await shot(`${name.toLowerCase()}-390`);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
    await view('Tables', 'Tables');
  });

  await t.test('sign out, sign in with the admin account; a non-admin is refused', async (t) => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    const other = uniqueEmail('plain');
    const made = await app.call('POST', '/auth/v1/signup', { body: { email: other, password: PASSWORD } });
    t.equal(made.status, 201);
    const form = page.getByRole('form', { name: 'Sign in' });
    await form.getByLabel('Email').fill(other);
    await form.getByLabel('Password').fill(PASSWORD);
    await form.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').getByText(/only service_role accounts can open the dashboard/).waitFor();
    await shot('refused');
    await form.getByLabel('Email').fill(email);
    await form.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 2, name: 'Tables' }).waitFor();
    t.pass('the admin is back in');
  });

  await t.test('an admin enrols a second factor from the offer; the next sign-in asks for its code', async (t) => {
    const offer = page.getByRole('region', { name: 'This admin account has no second factor' });
    await offer.getByRole('button', { name: 'Enrol an authenticator' }).click();
    const secret = await offer.getByLabel('Key').inputValue();
    const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 });
    // A code near a step's end could be judged a step later: start well inside one.
    await until(page, async () => Date.now() % 30_000 < 20_000);
    await offer.getByLabel('Code from the app').fill(totp.generate());
    await shot('enrol');
    await offer.getByRole('button', { name: 'Verify and turn on' }).click();
    await offer.waitFor({ state: 'detached' });
    await view('SQL', 'SQL');
    await page.getByLabel(/^Statements/).fill('select rolsuper from pg_roles where rolname = current_user');
    await page.getByRole('button', { name: 'Run' }).click();
    await page.getByRole('cell', { name: 'false', exact: true }).waitFor();
    t.pass('at aal2 the SQL view runs, and not as a superuser');

    await page.getByRole('button', { name: 'Sign out' }).click();
    const form = page.getByRole('form', { name: 'Sign in' });
    await form.getByLabel('Email').fill(email);
    await form.getByLabel('Password').fill(PASSWORD);
    await form.getByRole('button', { name: 'Sign in' }).click();
    const second = page.getByRole('form', { name: 'Second factor' });
    await second.waitFor();
    await shot('second-factor');
    // Each code is used once: the next step's (one step of drift is accepted).
    await second.getByLabel('Code').fill(totp.generate({ timestamp: Date.now() + 30_000 }));
    await second.getByRole('button', { name: 'Verify' }).click();
    await page.getByRole('heading', { level: 2, name: 'SQL' }).waitFor();
    await page.getByRole('link', { name: 'Users', exact: true }).click();
    await page.getByRole('heading', { level: 2, name: 'Users' }).waitFor();
    await page.getByRole('cell', { name: email, exact: true }).waitFor();
    t.pass('signed in at aal2: the admin endpoints answer');
    t.equal(await page.getByRole('region', { name: 'This admin account has no second factor' }).count(), 0, 'no offer at aal2');
  });

  t.test('no console error on the way', async (t) => {
    // The page waits for REST's schema cache before it loads a new table's rows, so no request
    // of the walk fails (a failed load shows as a console error without its address: the
    // addresses are listed here).
    t.same(failedLoads, [], 'no response of 400 or more to the page');
    t.same(consoleErrors, [], 'no console error, no page error');
  });
}

async function until(page: Page, fn: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await page.waitForTimeout(200);
  }
}
