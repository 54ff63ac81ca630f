/**
 * The first hour, as a newcomer lives it: `npm start` in the checkout with no DATABASE_URL
 * (the embedded PostgreSQL), the setup link it prints opened in headless Chromium, the first
 * admin created, and every view used against that embedded database — a table made in the SQL
 * view and a row inserted in the Tables view, a user created, a bucket made and a file
 * uploaded, a function's catalog, the live registry, the request log and the settings. Then
 * SIGTERM to what `npm start` started: exit 0.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { PASSWORD, uniqueEmail } from '../auth/helpers.ts';
import { chromiumMissing, launch } from '../client/browser.ts';
import { freePort } from '../helpers/ports.ts';

const CHECKOUT = fileURLToPath(new URL('../..', import.meta.url));
const SHOTS = fileURLToPath(new URL('../../.artifacts/dashboard/', import.meta.url));


async function waitFor(check: () => boolean, limitMs: number): Promise<boolean> {
  const until = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

const missing = chromiumMissing();
if (missing) {
  t.plan(0, missing);
} else {
  t.test('npm start, the printed setup link, every view on the embedded database', { timeout: 240_000 }, async (t) => {
    const outer = mkdtempSync(join(tmpdir(), 'plinth-first-start-'));
    chmodSync(outer, 0o711);
    t.teardown(() => rmSync(outer, { recursive: true, force: true }));
    const port = await freePort();
    // What a newcomer's shell holds: no DATABASE_URL, no secret (development mode: the SQL view is on).
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, DATA_DIR: join(outer, 'data'), PORT: String(port) };
    const child = spawn('npm', ['start'], { cwd: CHECKOUT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    t.teardown(() => child.kill('SIGKILL'));

    const LINK = /create one within the hour at (http:\/\/\S+\/_\/#\/setup\?token=\S+)/;
    t.ok(await waitFor(() => LINK.test(out) || child.exitCode !== null, 120_000), 'npm start prints the setup link');
    const link = LINK.exec(out)?.[1];
    if (!link) {
      t.fail(`no setup link in:\n${out}`);
      return;
    }
    t.equal(new URL(link).port, String(port), 'on the port it listens on');

    const ctx = await launch(t);
    const page = await ctx.newPage();
    await page.setViewportSize({ width: 1280, height: 800 });
    const consoleErrors: string[] = [];
    page.on('console', (m) => m.type() === 'error' && consoleErrors.push(m.text()));
    page.on('pageerror', (e) => consoleErrors.push(e.message));
    const shot = (name: string) => page.screenshot({ path: `${SHOTS}first-start-${name}.png`, fullPage: true });
    const view = async (name: string) => {
      await page.getByRole('link', { name, exact: true }).click();
      await page.getByRole('heading', { level: 2, name, exact: true }).waitFor();
    };

    await page.goto(link);
    await page.getByLabel('Email').fill(uniqueEmail('first'));
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create admin and sign in' }).click();
    await page.getByRole('heading', { level: 2, name: 'Tables' }).waitFor();
    t.pass('the setup link made the first admin, signed in');

    await view('SQL');
    await page.getByLabel(/^Statements/).fill(
      'create table public.first_notes (id bigint generated always as identity primary key, body text not null); select 1 as made',
    );
    await page.getByRole('button', { name: 'Run' }).click();
    await page.getByRole('cell', { name: '1', exact: true }).waitFor();
    t.pass('a table made in the SQL view');

    // The catalog reloads on DDL; the view lists the table once it has.
    await view('Tables');
    const listed = page.getByRole('button', { name: /^first_notes/ });
    const deadline = Date.now() + 30_000;
    while (!(await listed.count()) && Date.now() < deadline) {
      await view('SQL');
      await view('Tables');
    }
    await listed.click();
    await page.getByRole('button', { name: 'Insert a row' }).click();
    await page.getByRole('form', { name: 'New row' }).getByLabel(/^body/).fill('hello, embedded');
    await page.getByRole('button', { name: 'Insert', exact: true }).click();
    await page.getByRole('cell', { name: 'hello, embedded', exact: true }).waitFor();
    await shot('tables');
    t.pass('a row inserted in the Tables view');

    await view('Users');
    const user = uniqueEmail('newcomer');
    await page.getByLabel('Email', { exact: true }).fill(user);
    await page.getByLabel('Password (optional)').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create user' }).click();
    await page.getByRole('cell', { name: user, exact: true }).waitFor();
    t.pass('a user created');

    await view('Storage');
    await page.getByLabel('New bucket').fill('first-bucket');
    await page.getByRole('button', { name: 'Create bucket' }).click();
    await page.getByRole('heading', { level: 3, name: 'first-bucket' }).waitFor();
    await page.getByLabel(/Upload files/).setInputFiles({ name: 'hello.txt', mimeType: 'text/plain', buffer: Buffer.from('hello') });
    await page.getByRole('cell', { name: 'hello.txt', exact: true }).waitFor();
    await shot('storage');
    t.pass('a bucket made and a file uploaded');

    for (const name of ['Webhooks', 'Functions', 'Live']) {
      await view(name);
      await shot(name.toLowerCase());
      t.pass(`${name} opens`);
    }
    await view('Logs');
    await page.getByRole('button', { name: "The dashboard's own" }).click();
    await page.getByRole('cell', { name: /first_notes/ }).first().waitFor();
    t.pass("the Tables view's requests are in the log, among the dashboard's own");
    await view('Settings');
    await page.getByRole('table', { name: 'Features' }).waitFor();
    await shot('settings');
    t.same(consoleErrors, [], 'no console error on the way');

    child.kill('SIGTERM');
    t.equal(await exit, 0, 'SIGTERM to what npm start started: exit 0');
  });
}
