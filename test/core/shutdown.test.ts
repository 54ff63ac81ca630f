/**
 * Shutdown (contract §1, design.md, issue 18): SIGTERM drains the requests in flight; past
 * SHUTDOWN_TIMEOUT_MS their statements are cancelled in PostgreSQL, the connections are
 * closed, one log line says how many requests were cut, and the process exits.
 */
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/core/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { TEST_JWT_SECRET } from '../helpers/app.ts';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

interface Running {
  child: ChildProcess;
  url: string;
  anonKey: string;
  stdout(): string;
  exited: Promise<number | null>;
}

async function start(t: { teardown(fn: () => unknown): void }, db: TestDatabase, env: Record<string, string>): Promise<Running> {
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-shutdown-'));
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: db.url,
      MIGRATE_ON_START: 'false',
      JWT_SECRET: TEST_JWT_SECRET,
      HOST: '127.0.0.1',
      PORT: '0',
      DATA_DIR: dataDir,
      DB_POOL_SIZE: '2',
      LOG_LEVEL: 'info',
      SHUTDOWN_GRACE_MS: '0',
      ...env,
    },
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });
  await waitFor(async () => /plinth listening on (\S+)/.test(out) && /SERVICE_ROLE_KEY\b.*\n/.test(out), 120_000, () => `start: ${out}${err}`);
  return {
    child,
    url: /plinth listening on (\S+)/.exec(out)![1],
    // Not printed with DATABASE_URL set: derived from the same secret and DATA_DIR.
    anonKey: (await loadConfig({ DATA_DIR: dataDir, JWT_SECRET: TEST_JWT_SECRET })).anonKey,
    stdout: () => out,
    exited,
  };
}

async function waitFor(cond: () => Promise<boolean>, ms = 15000, what: () => string = () => 'condition'): Promise<void> {
  const until = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`not met in time: ${what()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function logLines(stdout: string): Array<Record<string, unknown>> {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Statements of this test's database running `slow` (test files run side by side: other databases' do not count). */
const sleeping = (db: TestDatabase) =>
  db.sql`select pid from pg_stat_activity
          where datname = current_database() and query like ${'%slow%'} and state = 'active'
            and pid <> pg_backend_pid() and query not like '%pg_stat_activity%'`.then((rows) => rows.length);

/**
 * SIGTERM with a call in flight: ready before, 503 `service shutting down` from /ready during
 * the grace (still accepting), and exit 0 within the test's own bound, far below the 60 s
 * the call would take.
 */
async function signalAndDrain(t: Test, app: Running): Promise<void> {
  t.equal((await fetch(app.url + '/ready')).status, 200, 'ready before the signal');
  app.child.kill('SIGTERM');
  await waitFor(async () => (await fetch(app.url + '/ready').then((r) => r.status, () => 0)) === 503, 5000, () => '/ready never turned 503');
  const during = await fetch(app.url + '/ready');
  t.same([during.status, ((await during.json()) as { reason: string }).reason], [503, 'service shutting down'], '/ready 503 during the drain');
  const code = await Promise.race([app.exited, new Promise<string>((r) => setTimeout(() => r('still running'), 30000))]);
  t.equal(code, 0, 'the process exits 0');
}

t.test('shutdown', async (t) => {
  const db = await createTestDatabase(t);
  await db.sql.unsafe(`
    create function public.slow(s float8) returns int language sql as 'select pg_sleep(s); select 1';
    grant execute on function public.slow(float8) to anon;
  `).simple();

  await t.test('a request in flight is finished within the deadline', async (t) => {
    const app = await start(t, db, { SHUTDOWN_TIMEOUT_MS: '20000' });
    const res = fetch(app.url + '/rest/v1/rpc/slow', {
      method: 'POST',
      headers: { apikey: app.anonKey, 'content-type': 'application/json' },
      body: '{"s": 0.5}',
    });
    await waitFor(async () => (await sleeping(db)) > 0);
    app.child.kill('SIGTERM');
    const r = await res;
    t.same([r.status, await r.json()], [200, 1], 'answered');
    t.equal(await app.exited, 0, 'exit 0');
    t.notOk(logLines(app.stdout()).some((l) => String(l.msg).includes('deadline')), 'no deadline line');
  });

  await t.test('past SHUTDOWN_TIMEOUT_MS the call in flight gets 503, statements are cancelled, the process exits 0', async (t) => {
    const app = await start(t, db, { SHUTDOWN_TIMEOUT_MS: '500', SHUTDOWN_GRACE_MS: '1500' });
    const res = fetch(app.url + '/rest/v1/rpc/slow', {
      method: 'POST',
      headers: { apikey: app.anonKey, 'content-type': 'application/json' },
      body: '{"s": 60}',
    }).then(
      async (r) => [r.status, await r.json()],
      () => 'closed',
    );
    await waitFor(async () => (await sleeping(db)) > 0);
    await signalAndDrain(t, app);
    t.same(await res, [503, { error: 'service shutting down' }], 'the call in flight gets 503');
    await waitFor(async () => (await sleeping(db)) === 0, 10000, () => 'the statement is still running');
    t.pass('the statement was cancelled in PostgreSQL');
    const line = logLines(app.stdout()).find((l) => String(l.msg).includes('deadline'));
    t.ok(line, 'one line says so');
    t.equal(line?.requests, 1, 'with how many requests were cut');
    t.match(String(line?.msg), /1 requests cut/);
  });
});

t.test('SIGTERM with a 60 s edge function call in flight: 503 for the call, /ready 503 during the drain, exit 0', { timeout: 240_000 }, async (t) => {
  const db = await createTestDatabase(t);
  const functionsDir = mkdtempSync(join(tmpdir(), 'plinth-shutdown-fn-'));
  t.teardown(() => rmSync(functionsDir, { recursive: true, force: true }));
  mkdirSync(join(functionsDir, 'slow'));
  // It says when it has the call, then answers after 60 s (FUNCTIONS_TIMEOUT_MS is 90 s here).
  writeFileSync(
    join(functionsDir, 'slow', 'index.ts'),
    `export default async () => {
  console.log('slow function has the call');
  await new Promise((r) => setTimeout(r, 60_000));
  return new Response('late');
};
`,
  );
  await db.sql`insert into edge.functions (name, runtime, verify_jwt) values ('slow', 'deno', false)`;
  const app = await start(t, db, { FUNCTIONS_DIR: functionsDir, FUNCTIONS_TIMEOUT_MS: '90000', SHUTDOWN_TIMEOUT_MS: '1000', SHUTDOWN_GRACE_MS: '1500' });
  const res = fetch(app.url + '/functions/v1/slow', { method: 'POST', headers: { apikey: app.anonKey } }).then(
    async (r) => [r.status, await r.json()],
    () => 'closed',
  );
  await waitFor(async () => app.stdout().includes('slow function has the call'), 120_000, () => `the function never got the call: ${app.stdout()}`);
  await signalAndDrain(t, app);
  t.same(await res, [503, { error: 'service shutting down' }], 'the function call in flight gets 503');
  const line = logLines(app.stdout()).find((l) => String(l.msg).includes('deadline'));
  t.equal(line?.requests, 1, 'the deadline line counts the cut call');
});

t.test('npm start passes a SIGTERM on to the service', async (t) => {
  const db = await createTestDatabase(t);
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-npmstart-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const root = fileURLToPath(new URL('../..', import.meta.url));
  // npm as a supervisor starts it: `npm start` in the checkout.
  const npm = spawn('npm', ['start', '--silent'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATABASE_URL: db.url, MIGRATE_ON_START: 'false', JWT_SECRET: TEST_JWT_SECRET, HOST: '127.0.0.1', PORT: '0', DATA_DIR: dataDir, DB_POOL_SIZE: '2', LOG_LEVEL: 'info', SHUTDOWN_GRACE_MS: '0' },
  });
  let out = '';
  npm.stdout!.on('data', (d) => (out += d));
  npm.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => npm.on('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (npm.exitCode === null) npm.kill('SIGKILL');
  });
  await waitFor(async () => /plinth listening on (\S+)/.test(out), 120_000, () => out);
  const url = /plinth listening on (\S+)/.exec(out)![1];
  npm.kill('SIGTERM');
  t.equal(await exited, 0, 'npm exits 0: the service drained and exited 0');
  t.match(out, /shutting down/, 'the service saw the signal');
  const after = await fetch(url + '/health').then(() => 'answering', () => 'gone');
  t.equal(after, 'gone', 'no orphaned service left listening');
});
