/**
 * From a fresh checkout: `npm start` (src/main.ts) in a folder holding
 * `functions/hello/index.ts`, with its catalog row, answers `POST /functions/v1/hello` 200
 * from the bundled Deno of the `deno` npm package; no FUNCTIONS_DIR or EDGE_RUNTIME_URL set
 * (the default `./functions`). SIGTERM stops the service and the runtime. The database is
 * a migrated test clone (the embedded one is covered by test/core/embedded.test.ts).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/core/config.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { waitFor } from './helpers.ts';
import { freePort } from '../helpers/ports.ts';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));


t.test('npm start serves functions/hello/index.ts from the bundled Deno', { timeout: 120_000 }, async (t) => {
  const project = mkdtempSync(join(tmpdir(), 'plinth-start-'));
  t.teardown(() => rmSync(project, { recursive: true, force: true }));
  mkdirSync(join(project, 'functions', 'hello'), { recursive: true });
  writeFileSync(
    join(project, 'functions', 'hello', 'index.ts'),
    `export default async (req: Request) => {
  const { name } = await req.json();
  return new Response(JSON.stringify({ message: \`Hello \${name}!\` }), { headers: { 'Content-Type': 'application/json' } });
};
`,
  );
  const db = await createTestDatabase(t);
  await db.sql`insert into edge.functions (name, runtime) values ('hello', 'deno')`;

  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [MAIN], {
    cwd: project,
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url, PORT: String(port), DATA_DIR: join(project, '.data'), LOG_LEVEL: 'info' },
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  t.teardown(() => void child.kill('SIGKILL'));

  t.ok(await waitFor(() => /SERVICE_ROLE_KEY\b.*\n/.test(out), 60_000, 100), 'started, banner printed');
  // The anon key derives from the development secret kept in DATA_DIR (npm run keys prints it too).
  const anonKey = (await loadConfig({ DATA_DIR: join(project, '.data') })).anonKey;
  let res: Response | null = null;
  t.ok(
    await waitFor(async () => {
      res = await fetch(url + '/functions/v1/hello', {
        method: 'POST',
        headers: { apikey: anonKey, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'plinth' }),
      });
      return res.status !== 502;
    }, 30_000, 200),
    'the runtime answers',
  );
  t.equal(res!.status, 200);
  t.same(await res!.json(), { message: 'Hello plinth!' });
  const bare = await fetch(url + '/functions/v1/hello', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"name":"dev"}' });
  t.equal(bare.status, 200, 'development mode (no JWT_SECRET): no credential passes as anon, as everywhere');
  const listening = /"pid":(\d+)[^\n]*"msg":"edge runtime listening"/.exec(out);
  t.ok(listening, 'the service logged the runtime it started');
  const denoPid = Number(listening![1]);

  child.kill('SIGTERM');
  t.equal(await exit, 0, 'SIGTERM: exit 0');
  const alive = () => {
    try {
      process.kill(denoPid, 0);
      return true;
    } catch {
      return false;
    }
  };
  t.ok(await waitFor(() => !alive(), 5000), 'the Deno runtime stopped with the service');

  // A service killed hard cannot stop its runtime: the runtime sees its stdin close and exits.
  const again = spawn(process.execPath, [MAIN], {
    cwd: project,
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url, PORT: String(port), DATA_DIR: join(project, '.data'), LOG_LEVEL: 'info' },
  });
  let out2 = '';
  again.stdout.on('data', (d) => (out2 += d));
  again.stderr.on('data', (d) => (out2 += d));
  const exit2 = new Promise<void>((resolve) => again.on('exit', () => resolve()));
  t.teardown(() => void again.kill('SIGKILL'));
  t.ok(await waitFor(() => /"msg":"edge runtime listening"/.test(out2), 60_000, 100), 'started again with its runtime');
  const pid2 = Number(/"pid":(\d+)[^\n]*"msg":"edge runtime listening"/.exec(out2)![1]);
  const alive2 = () => {
    try {
      process.kill(pid2, 0);
      return true;
    } catch {
      return false;
    }
  };
  t.ok(alive2(), 'the runtime runs');
  again.kill('SIGKILL');
  await exit2;
  t.ok(await waitFor(() => !alive2(), 10_000), 'SIGKILL of the service: the runtime exits by itself');
});
