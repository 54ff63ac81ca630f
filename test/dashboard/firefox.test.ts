/// <reference lib="dom" />
/**
 * The dashboard in headless Firefox (Debian's firefox-esr, driven over WebDriver BiDi by
 * puppeteer-core: playwright-core's Firefox needs its own patched build, which this machine
 * cannot download). The Chromium walk (browser.test.ts) does every action; this one proves the
 * same pages work in the second engine, run as `npm run dev` runs the service: the setup link,
 * every view opened, a row inserted, a table made with an owner-only policy (its SQL found in
 * migrations/current.sql, applied by the watch, served by REST under the policy), a schedule
 * created and its run seen, the backups, a bucket made and a file uploaded, a function
 * invoked, every view at 390 px, and no console error. Screenshots go to
 * .artifacts/dashboard/firefox-*.png (not committed).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import puppeteer from 'puppeteer-core';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, uniqueEmail } from '../auth/helpers.ts';
import { setupToken } from '../../src/dashboard/index.ts';
import { browserMissing } from '../client/browser.ts';
import { BACKUP_NAME, ownerOnlyServed, walkFolders, watchApplies } from './walk.ts';

const FIREFOX = process.env.FIREFOX_PATH ?? '/usr/bin/firefox-esr';
const SHOTS = fileURLToPath(new URL('../../.artifacts/dashboard/', import.meta.url));
const VIEWS = ['Tables', 'SQL', 'Users', 'Storage', 'Webhooks', 'Functions', 'Live', 'Schedules', 'Backups', 'Logs', 'Settings'];

/** The element whose accessible name is `name` (and role, when given). */
const aria = (name: string, role?: string) => `::-p-aria(${role ? `[name=${JSON.stringify(name)}][role="${role}"]` : JSON.stringify(name)})`;

const missing = browserMissing('Firefox', FIREFOX, 'firefox-esr');
if (missing) {
  t.plan(0, missing);
} else {
  await run();
}

async function run() {
  mkdirSync(SHOTS, { recursive: true });
  const folders = walkFolders(t, 'firefox');
  const app = await startApp(t, { env: { AUTH_RATE_LIMIT: '0', ENABLE_SQL_ENDPOINT: 'true', FUNCTIONS_DIR: '/nonexistent/plinth-functions', ...folders.env } });
  await app.db.sql
    .unsafe(
      `create table public.notes (id bigint generated always as identity primary key, body text not null);
       insert into public.notes (body) values ('seeded');
       create function public.echo(payload jsonb) returns jsonb language sql stable as $$ select jsonb_build_object('got', payload) $$;
       grant execute on function public.echo(jsonb) to service_role;
       create function public.ping(p jsonb) returns void language sql as $$ select null::void $$;
       grant execute on function public.ping(jsonb) to service_role;
       insert into edge.functions (name, runtime) values ('echo', 'plv8');`,
    )
    .simple();
  for (const path of ['/api/catalog/refresh', '/functions/v1/_refresh']) {
    const r = await app.call('POST', path, { token: app.serviceKey });
    if (r.status !== 200) throw new Error(`${path}: ${r.status}`);
  }

  const browser = await puppeteer.launch({ browser: 'firefox', executablePath: FIREFOX, headless: true, userDataDir: join(tmpdir(), `plinth-firefox-${process.pid}`) });
  t.teardown(() => browser.close());
  t.comment(`browser: ${await browser.version()}`);
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  const consoleErrors: string[] = [];
  page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
  page.on('pageerror', (e) => consoleErrors.push(e instanceof Error ? e.message : String(e)));
  const shot = (name: string) => page.screenshot({ path: `${SHOTS}firefox-${name}.png`, fullPage: true });
  const heading = (name: string) => page.waitForSelector(aria(name, 'heading'));
  const text = (s: string) => page.waitForSelector(`::-p-text(${s})`);
  const click = async (selector: string) => (await page.waitForSelector(selector))!.click();
  const fill = async (selector: string, value: string) => {
    const el = (await page.waitForSelector(selector))!;
    await el.click();
    await page.keyboard.down('Control');
    await page.keyboard.press('a');
    await page.keyboard.up('Control');
    await el.type(value);
  };

  await t.test('the setup link creates the first admin and signs in', async (t) => {
    const token = await setupToken(app.service.db);
    await page.goto(`${app.url}/_/#/setup?token=${token}`);
    await heading('Create the first admin');
    await fill('form[aria-labelledby="setup-title"] input[type="email"]', uniqueEmail('fox'));
    await fill('form[aria-labelledby="setup-title"] input[type="password"]', PASSWORD);
    await click(aria('Create admin and sign in', 'button'));
    await heading('Tables');
    await shot('setup-done');
    t.pass('signed in');
  });

  await t.test('every view opens', async (t) => {
    for (const view of VIEWS) {
      await click(aria(view, 'link'));
      await heading(view);
      await page.waitForNetworkIdle({ idleTime: 200, timeout: 15_000 });
      await shot(view.toLowerCase());
      t.pass(view);
    }
  });

  await t.test('Tables: a row inserted', async (t) => {
    await click(aria('Tables', 'link'));
    await click('nav[aria-label="Tables and views"] button::-p-text(notes)');
    await text('seeded');
    await click(aria('Insert a row', 'button'));
    await click(aria('As JSON'));
    await fill(aria('New row (JSON)'), '{"body": "from firefox"}');
    await click(aria('Insert', 'button'));
    await page.waitForSelector(aria('from firefox', 'cell'));
    const rows = await app.db.sql`select body from public.notes order by id`;
    t.same(rows.map((r) => r.body), ['seeded', 'from firefox']);
  });

  await t.test('Tables: a table made with an owner-only policy, as a migration the watch applies; REST serves it', async (t) => {
    await click(aria('New table', 'button'));
    await fill('section[aria-labelledby="new-table-title"] > label.field input', 'foxnotes');
    await click(aria('Add a column', 'button'));
    await fill('fieldset.column:nth-of-type(3) label.field:nth-of-type(1) input', 'entry');
    await click(aria('Show the SQL', 'button'));
    const sql = await page.waitForSelector('pre[aria-label="SQL: create foxnotes"]');
    const text = (await sql!.evaluate((e) => e.textContent)) ?? '';
    t.match(text, /create policy foxnotes_owner_only on public\.foxnotes for all to authenticated/, 'the SQL is shown first');
    await shot('tables-new');
    await click('::-p-text(Append to)');
    const file = await watchApplies(app, folders.migrations, 'create policy foxnotes_owner_only');
    t.ok(file.includes(text.trim()), 'migrations/current.sql holds the SQL shown');
    await page.waitForSelector('::-p-text(public.foxnotes)', { timeout: 60_000 });
    t.same(await ownerOnlyServed(app, 'foxnotes', 'entry'), { own: [{ entry: 'mine' }], other: [] }, 'REST serves it: each user sees their own rows only');
  });

  await t.test('Schedules: one created and its run seen', async (t) => {
    await click(aria('Schedules', 'link'));
    await heading('Schedules');
    await fill(aria('Schedule name'), 'foxping');
    await fill('form[aria-label="New schedule"] label.field:nth-of-type(3) input', 'sql:public.ping');
    await click(aria('Create schedule', 'button'));
    await page.waitForSelector(aria('foxping', 'cell'));
    await click(aria('Run foxping now', 'button'));
    const deadline = Date.now() + 30_000;
    while (!(await page.$(aria('succeeded', 'cell')))) {
      if (Date.now() > deadline) throw new Error('no succeeded run');
      await click(aria('Refresh', 'button'));
      await page.waitForNetworkIdle({ idleTime: 100, timeout: 5000 });
    }
    await shot('schedules');
    const [run] = await app.db.sql`select outcome from plinth_private.runs where name = 'foxping'`;
    t.equal(run.outcome, 'succeeded');
  });

  await t.test('Backups: the base backup and a restore command', async (t) => {
    await click(aria('Backups', 'link'));
    await heading('Backups');
    await page.waitForSelector(aria(BACKUP_NAME, 'cell'));
    const commands = await page.$eval('pre[aria-label="Restore commands"]', (e) => e.textContent);
    t.ok(commands?.includes(`BACKUP_DIR=${folders.backups} npm run restore -- --to '`), commands ?? '');
    await shot('backups');
  });

  await t.test('Storage: a bucket made and a file uploaded', async (t) => {
    await click(aria('Storage', 'link'));
    await fill(aria('New bucket'), 'foxes');
    await click(aria('Create bucket', 'button'));
    await page.waitForSelector(aria('foxes', 'heading'));
    const file = join(tmpdir(), `plinth-firefox-${process.pid}.txt`);
    writeFileSync(file, 'hello from firefox');
    const input = (await page.waitForSelector('input[type="file"]'))!;
    await input.uploadFile(file);
    await page.waitForSelector(aria(file.split('/').pop()!, 'cell'));
    const objects = await app.db.sql`select name from storage.objects where bucket_id = 'foxes'`;
    t.same(objects.map((o) => o.name), [file.split('/').pop()]);
  });

  await t.test('Functions: an invocation', async (t) => {
    await click(aria('Functions', 'link'));
    await click(aria('Invoke echo', 'button'));
    await fill(aria('JSON body'), '{"hello": "firefox"}');
    await click(aria('Invoke', 'button'));
    await text('Status 200').catch(async (err: unknown) => {
      t.fail(`the answer: ${await page.$eval('main', (e) => e.textContent)}`);
      throw err;
    });
    const body = await page.$eval('.answer pre', (e) => e.textContent);
    t.same(JSON.parse(body ?? 'null'), { got: { hello: 'firefox' } });
  });

  await t.test('every view reachable at 390 px wide, none scrolling sideways', async (t) => {
    await page.setViewport({ width: 390, height: 800 });
    for (const view of VIEWS) {
      const link = (await page.waitForSelector(aria(view, 'link')))!;
      const box = await link.boundingBox();
      t.ok(box !== null && box.x >= 0 && box.x + box.width <= 390 && box.y >= 0 && box.y + box.height <= 800, `${view}: its link is on the screen`);
      await link.click();
      await heading(view);
      await page.waitForNetworkIdle({ idleTime: 200, timeout: 15_000 });
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      t.ok(overflow <= 0, `${view}: no horizontal scroll of the page (${overflow} px)`);
      await shot(`${view.toLowerCase()}-390`);
    }
  });

  t.test('no console error on the way', async (t) => {
    t.same(consoleErrors, []);
  });
}

