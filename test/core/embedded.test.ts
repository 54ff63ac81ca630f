/**
 * `npm start` with no DATABASE_URL (contract §1): an embedded PostgreSQL under DATA_DIR,
 * migrated, answering /health; SIGTERM exits 0; a second start reuses the data.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer } from 'node:net';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

interface Started {
  child: ChildProcess;
  stdout: () => string;
  exit: Promise<number | null>;
}

function start(env: Record<string, string>): Started {
  const child = spawn(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', ...env } });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, stdout: () => out, exit };
}

async function waitHealthy(url: string, limitMs: number): Promise<boolean> {
  const until = Date.now() + limitMs;
  while (Date.now() < until) {
    try {
      const r = await fetch(url + '/health');
      if (r.status === 200) return true;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return false;
}

async function waitFor(check: () => boolean, limitMs: number): Promise<boolean> {
  const until = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

t.test('embedded PostgreSQL: start, persist, restart', { timeout: 170_000 }, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-embedded-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = { DATA_DIR: dataDir, PORT: String(port), ENABLE_SQL_ENDPOINT: 'true' };

  const first = start(env);
  t.teardown(() => first.child.kill('SIGKILL'));
  t.ok(await waitHealthy(url, 60_000), 'GET /health answers 200 within 60 s of a cold start');
  // The keys are printed once the worker runs too, a moment after the server listens.
  t.ok(await waitFor(() => /SERVICE_ROLE_KEY=\S+\n/.test(first.stdout()), 10_000), 'start-up banner printed');
  t.match(first.stdout(), /DATABASE_URL=postgres:\/\/postgres:[^@]+@127\.0\.0\.1:\d+\/plinth/, 'prints the embedded DATABASE_URL');
  t.match(first.stdout(), /ANON_KEY=ey/, 'prints the anon key');
  t.match(first.stdout(), /SERVICE_ROLE_KEY=ey/, 'prints the service-role key');
  const serviceKey = /SERVICE_ROLE_KEY=(\S+)/.exec(first.stdout())![1];
  const put = await fetch(url + '/api/sql', {
    method: 'POST',
    headers: { authorization: `Bearer ${serviceKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query: "create table public.kept (v text); insert into public.kept values ('still here')" }),
  });
  t.equal(put.status, 200);
  first.child.kill('SIGTERM');
  t.equal(await first.exit, 0, 'SIGTERM: exit 0');
  t.notOk(existsSync(join(dataDir, 'postgres', 'postmaster.pid')), 'the embedded PostgreSQL stopped with the service');

  const second = start(env);
  t.teardown(() => second.child.kill('SIGKILL'));
  t.ok(await waitHealthy(url, 60_000), 'the second start is healthy');
  t.ok(await waitFor(() => /SERVICE_ROLE_KEY=\S+\n/.test(second.stdout()), 10_000), 'start-up banner printed again');
  t.notMatch(second.stdout(), /initialising the embedded PostgreSQL/, 'the second start reuses the cluster');
  t.equal(/SERVICE_ROLE_KEY=(\S+)/.exec(second.stdout())?.[1], serviceKey, 'and prints the same keys');
  const get = await fetch(url + '/api/sql', {
    method: 'POST',
    headers: { authorization: `Bearer ${serviceKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query: 'select v from public.kept' }),
  });
  t.same(await get.json(), [{ v: 'still here' }], 'the data persisted');
  second.child.kill('SIGINT');
  t.equal(await second.exit, 0, 'SIGINT: exit 0');
});
