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
import { freePort } from '../helpers/ports.ts';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));


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
  // A second start in the same folder says so, before any PostgreSQL of its own starts.
  const again = start(env);
  t.teardown(() => again.child.kill('SIGKILL'));
  t.equal(await again.exit, 1, 'a second start in the same folder: exit 1');
  t.match(again.stdout().trim(), new RegExp(`^start failed: plinth already runs here on :${port} \\(pid ${first.child.pid}\\)$`), 'it names the running one');
  const databaseUrl = /DATABASE_URL=(\S+)/.exec(first.stdout())![1];
  first.child.kill('SIGTERM');
  t.equal(await first.exit, 0, 'SIGTERM: exit 0');
  t.notOk(existsSync(join(dataDir, 'postgres', 'postmaster.pid')), 'the embedded PostgreSQL stopped with the service');

  const second = start(env);
  t.teardown(() => second.child.kill('SIGKILL'));
  t.ok(await waitHealthy(url, 60_000), 'the second start is healthy');
  t.ok(await waitFor(() => /SERVICE_ROLE_KEY=\S+\n/.test(second.stdout()), 10_000), 'start-up banner printed again');
  t.notMatch(second.stdout(), /initialising the embedded PostgreSQL/, 'the second start reuses the cluster');
  t.equal(/SERVICE_ROLE_KEY=(\S+)/.exec(second.stdout())?.[1], serviceKey, 'and prints the same keys');
  t.equal(/DATABASE_URL=(\S+)/.exec(second.stdout())?.[1], databaseUrl, 'and the same DATABASE_URL (the port is kept)');
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

t.test('a port in use is found before PostgreSQL starts', { timeout: 60_000 }, async (t) => {
  const outer = mkdtempSync(join(tmpdir(), 'plinth-busy-'));
  chmodSync(outer, 0o711);
  t.teardown(() => rmSync(outer, { recursive: true, force: true }));
  const busy = createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
  t.teardown(() => busy.close());
  const port = (busy.address() as { port: number }).port;
  const started = start({ DATA_DIR: join(outer, 'data'), PORT: String(port) });
  t.teardown(() => started.child.kill('SIGKILL'));
  t.equal(await started.exit, 1, 'exit 1');
  t.match(started.stdout().trim(), new RegExp(`^start failed: port ${port} on 127\\.0\\.0\\.1 is in use: stop what uses it, or set PORT$`), 'one line naming the port');
  t.notOk(existsSync(join(outer, 'data', 'postgres')), 'no PostgreSQL was initialised');
});

t.test('as root in a folder others cannot enter, with no DATA_DIR: the data goes under /var/lib/plinth', { skip: process.getuid?.() !== 0 ? 'not root' : false, timeout: 170_000 }, async (t) => {
  const closed = mkdtempSync(join(tmpdir(), 'plinth-home-')); // 0700, like /root
  const port = await freePort();
  const child = spawn(process.execPath, [MAIN], { cwd: closed, env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', PORT: String(port) } });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let moved: string | null = null;
  t.teardown(async () => {
    child.kill('SIGKILL');
    rmSync(closed, { recursive: true, force: true });
    if (moved?.startsWith('/var/lib/plinth/')) rmSync(moved, { recursive: true, force: true });
  });
  t.ok(await waitHealthy(`http://127.0.0.1:${port}`, 120_000), 'healthy without a chmod');
  moved = /^data folder: (\S+)/m.exec(out)?.[1] ?? null;
  t.match(moved, /^\/var\/lib\/plinth\/plinth-home-\w+-[0-9a-f]{8}$/, 'one folder per checkout, printed');
  t.ok(existsSync(join(moved!, 'postgres', 'PG_VERSION')), 'the cluster lives there');
  t.equal(statSync(closed).mode & 0o777, 0o700, 'the closed folder stays closed');
  child.kill('SIGTERM');
  t.equal(await exit, 0);
});
