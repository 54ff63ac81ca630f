/**
 * The bundled Deno runtime (issue 14 item 4, contract §6): started from the `deno` npm
 * package with a real FUNCTIONS_DIR. A call answers from `<name>/index.ts`; an edited file
 * answers anew without a restart; a function that throws gives 500 JSON with its stack in
 * the service log only; permissions are narrowed (network, read of FUNCTIONS_DIR, the
 * FUNCTIONS_ENV variables); a killed runtime comes back; it stops with the service.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { bundledRuntime } from '../../src/functions/index.ts';
import { waitFor } from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'plinth-functions-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function writeFunction(name: string, source: string): void {
  mkdirSync(join(dir, name), { recursive: true });
  const file = join(dir, name, 'index.ts');
  writeFileSync(file, source);
  // A distinct modification time even within the file system's timestamp resolution.
  const when = new Date(Date.now() + Math.floor(Math.random() * 1_000_000) + 1000);
  utimesSync(file, when, when);
}

const hello = (version: string) => `
export default async (req: Request): Promise<Response> => {
  const url = new URL(req.url);
  const body = req.method === 'GET' ? null : await req.text();
  return Response.json({ version: '${version}', method: req.method, path: url.pathname, query: url.search, body,
    apikey: req.headers.get('apikey') !== null, type: req.headers.get('content-type') }, { headers: { 'cache-control': 'no-store' } });
};
`;
writeFunction('hello', hello('v1'));
writeFunction('thrower', `export default (): Response => { throw new Error('kaboom-in-function'); };`);
writeFunction(
  'probe',
  `
const attempt = async (f: () => unknown) => { try { await f(); return 'allowed'; } catch (e) { return (e as Error).name; } };
export default async (): Promise<Response> => Response.json({
  greeting: Deno.env.get('PLINTH_FN_GREETING') ?? null,
  otherEnv: await attempt(() => Deno.env.get('PLINTH_FN_HIDDEN')),
  readOwnDir: await attempt(() => Deno.readTextFile(new URL('./index.ts', import.meta.url))),
  readElsewhere: await attempt(() => Deno.readTextFile('/etc/hostname')),
  write: await attempt(() => Deno.writeTextFile(new URL('./written.txt', import.meta.url), 'x')),
  run: await attempt(() => new Deno.Command('/bin/true').output()),
});
`,
);

const logs: string[] = [];
const log = pino({ level: 'info', base: undefined }, { write: (s: string) => void logs.push(s) });
const db = await createTestDatabase(t);
await db.sql`insert into edge.functions (name, runtime, verify_jwt) values ('hello', 'deno', true), ('thrower', 'deno', true), ('probe', 'deno', false)`;
const app = await startApp(t, {
  db,
  log,
  env: { FUNCTIONS_DIR: dir, FUNCTIONS_ENV: 'PLINTH_FN_GREETING', PLINTH_FN_GREETING: 'hi there', PLINTH_FN_HIDDEN: 'not for functions' },
});
// The process of 'hello' (one per function).
const runtime = bundledRuntime(app.service.app)?.member('hello');

t.test('the bundled runtime answers from FUNCTIONS_DIR/<name>/index.ts', async (t) => {
  t.ok(runtime, 'a bundled runtime was started (EDGE_RUNTIME_URL unset, FUNCTIONS_DIR exists)');
  const r = await app.call('POST', '/functions/v1/hello/sub/path?q=1', { apikey: app.anonKey, body: { a: 1 } });
  t.equal(r.status, 200);
  t.same(r.body, { version: 'v1', method: 'POST', path: '/hello/sub/path', query: '?q=1', body: '{"a":1}', apikey: true, type: 'application/json' });
  t.equal(r.headers.get('cache-control'), 'no-store', "the function's headers");
  const g = await app.call('GET', '/functions/v1/hello', { apikey: app.anonKey });
  t.equal(g.body.method, 'GET');
  t.equal((await app.call('GET', '/functions/v1/hello')).status, 401, 'verify_jwt still applies before the runtime');
  t.match(runtime!.url, /^http:\/\/127\.0\.0\.1:\d+$/, 'on a loopback port of its own');
});

t.test('an edited file answers anew without a restart', async (t) => {
  const pid = runtime!.pid;
  writeFunction('hello', hello('v2'));
  const r = await app.call('POST', '/functions/v1/hello', { apikey: app.anonKey, body: {} });
  t.equal(r.status, 200);
  t.equal(r.body.version, 'v2');
  t.equal(runtime!.pid, pid, 'same process');
});

t.test('a function that throws: 500 JSON, the stack in the service log, not in the response', async (t) => {
  const r = await app.call('POST', '/functions/v1/thrower', { apikey: app.anonKey, body: {} });
  t.equal(r.status, 500);
  t.same(r.body, { error: 'internal error' });
  t.notMatch(r.text, /kaboom|at /, 'no message, no stack');
  t.ok(await waitFor(() => logs.some((l) => l.includes('kaboom-in-function') && l.includes('thrower/index.ts'))), 'the stack is in the log');
  const line = JSON.parse(logs.find((l) => l.includes('kaboom-in-function'))!) as { level: number; function: string };
  t.equal(line.level, 50, 'at level error');
  t.equal(line.function, 'thrower');
});

t.test('permissions: network, read of FUNCTIONS_DIR, FUNCTIONS_ENV, nothing else', async (t) => {
  const r = await app.call('GET', '/functions/v1/probe');
  t.equal(r.status, 200, 'verify_jwt false: no credential needed');
  t.same(r.body, {
    greeting: 'hi there',
    otherEnv: 'NotCapable',
    readOwnDir: 'allowed',
    readElsewhere: 'NotCapable',
    write: 'NotCapable',
    run: 'NotCapable',
  });
});

t.test('a killed runtime is restarted; calls meanwhile get 502', async (t) => {
  const pid = runtime!.pid!;
  t.ok(pid > 0);
  process.kill(pid, 'SIGKILL');
  t.ok(await waitFor(() => runtime!.pid !== pid), 'the supervisor saw it die');
  if (runtime!.url === null) {
    const during = await app.call('POST', '/functions/v1/hello', { apikey: app.anonKey, body: {} });
    // Only meaningful if the runtime was still down when the call was answered.
    if (runtime!.url === null) {
      t.equal(during.status, 502, 'down: 502');
      t.same(during.body, { error: 'edge runtime unavailable' });
    }
  }
  t.ok(
    await waitFor(async () => (await app.call('POST', '/functions/v1/hello', { apikey: app.anonKey, body: {} })).status === 200, 20_000, 100),
    'answers again',
  );
  t.not(runtime!.pid, pid, 'from a new process');
  t.equal(runtime!.starts, 2);
  t.ok(logs.some((l) => l.includes('edge runtime exited; restarting')), 'the crash is logged');
});

t.test('the runtime stops with the service', async (t) => {
  const pid = runtime!.pid!;
  await app.service.close();
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  t.ok(await waitFor(() => !alive(), 5000), 'the Deno process is gone');
  t.equal(runtime!.url, null);
});
