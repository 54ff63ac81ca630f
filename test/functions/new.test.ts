/**
 * `npm run functions:new -- <name>` (issue 14 item 6): writes FUNCTIONS_DIR/<name>/index.ts
 * from the template and inserts the catalog row; a running service (started before the
 * folder existed) serves the new function from the bundled Deno without a restart.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { waitFor } from './helpers.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function npmRun(args: string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('npm', ['run', '--silent', 'functions:new', '--', ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env } });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('close', (code) => resolve({ code, out }));
  });
}

t.test('functions:new writes the file and the row; the service serves it', { timeout: 90_000 }, async (t) => {
  const base = mkdtempSync(join(tmpdir(), 'plinth-fnnew-'));
  t.teardown(() => rmSync(base, { recursive: true, force: true }));
  const dir = join(base, 'functions');
  const db = await createTestDatabase(t);
  const app = await startApp(t, { db, env: { FUNCTIONS_DIR: dir } });
  const before = await app.call('POST', '/functions/v1/greeter', { apikey: app.anonKey, body: {} });
  t.equal(before.status, 404, 'no such function yet');

  const env = { DATABASE_URL: db.url, FUNCTIONS_DIR: dir, DATA_DIR: join(base, '.data') };
  const r = await npmRun(['greeter'], env);
  t.equal(r.code, 0, r.out);
  t.match(r.out, /wrote .*greeter\/index\.ts/);
  t.match(r.out, /catalog row added: greeter/);
  t.ok(existsSync(join(dir, 'greeter', 'index.ts')));
  const [row] = await db.sql`select runtime, status, verify_jwt from edge.functions where name = 'greeter'`;
  t.same({ ...row }, { runtime: 'deno', status: 'active', verify_jwt: true });

  t.ok(
    await waitFor(async () => (await app.call('POST', '/functions/v1/greeter', { apikey: app.anonKey, body: { a: 1 } })).status === 200, 30_000, 100),
    'served without a restart',
  );
  const res = await app.call('POST', '/functions/v1/greeter', { apikey: app.anonKey, body: { a: 1 } });
  t.same(res.body, { message: 'Hello from greeter!', input: { a: 1 } }, "the template's answer");

  writeFileSync(join(dir, 'greeter', 'index.ts'), '// mine\n');
  const again = await npmRun(['greeter'], env);
  t.equal(again.code, 0);
  t.match(again.out, /exists; left as it is/);
  t.equal(readFileSync(join(dir, 'greeter', 'index.ts'), 'utf8'), '// mine\n', 'an existing file is never overwritten');

  const open = await npmRun(['open-one', '--no-verify-jwt'], env);
  t.equal(open.code, 0, open.out);
  const [o] = await db.sql`select verify_jwt from edge.functions where name = 'open-one'`;
  t.equal(o.verify_jwt, false, '--no-verify-jwt');

  const bad = await npmRun(['../escape'], env);
  t.equal(bad.code, 1, 'a name that is not a plain identifier is refused');
  t.notOk(existsSync(join(base, 'escape')));
});
