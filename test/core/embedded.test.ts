/**
 * `npm start` with no DATABASE_URL (contract §1): an embedded PostgreSQL under DATA_DIR,
 * migrated, answering /health; SIGTERM exits 0; a second start reuses the data.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, existsSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, parse } from 'node:path';
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

/** The mode of every folder from `dir` up to the root. */
function modes(dir: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (let d = dir; ; d = dirname(d)) {
    out[d] = statSync(d).mode & 0o7777;
    if (d === parse(d).root) break;
  }
  return out;
}

const CHECKOUT = fileURLToPath(new URL('../..', import.meta.url));

t.test('embedded PostgreSQL: start, persist, restart', { timeout: 170_000 }, async (t) => {
  // DATA_DIR does not exist yet (plinth creates it) inside a folder others may pass through.
  const outer = mkdtempSync(join(tmpdir(), 'plinth-embedded-'));
  chmodSync(outer, 0o711);
  t.teardown(() => rmSync(outer, { recursive: true, force: true }));
  const dataDir = join(outer, 'data');
  const before = { ...modes(outer), ...modes(CHECKOUT) };
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
  t.same({ ...modes(outer), ...modes(CHECKOUT) }, before, 'no folder plinth did not create changed its mode');
});

t.test('as root, a DATA_DIR the postgres user cannot reach: one clear line, no mode changed', { skip: process.getuid?.() !== 0 ? 'not root' : false, timeout: 60_000 }, async (t) => {
  const closed = mkdtempSync(join(tmpdir(), 'plinth-closed-')); // 0700
  t.teardown(() => rmSync(closed, { recursive: true, force: true }));
  const dataDir = join(closed, 'data');
  const before = modes(closed);
  const started = start({ DATA_DIR: dataDir, PORT: String(await freePort()) });
  t.teardown(() => started.child.kill('SIGKILL'));
  t.equal(await started.exit, 1, 'exit 1');
  const lines = started.stdout().trim().split('\n');
  t.equal(lines.length, 1, 'one line');
  t.match(lines[0], `cannot reach DATA_DIR ${dataDir}: ${closed} is closed to other users`, 'names the folder');
  t.match(lines[0], /set DATA_DIR to a folder it can reach .* or run chmod o\+x/, 'and the fix');
  t.notMatch(started.stdout(), /\bat \S+ \(/, 'no stack trace');
  t.same(modes(closed), before, 'the closed folder stays closed');
});
