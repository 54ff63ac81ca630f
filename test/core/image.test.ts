/**
 * What the container image holds, tested without a Docker engine (test/helpers/image.ts):
 * the Dockerfile's COPY lines laid out in a temporary folder, the install the image runs
 * (`npm ci --omit=dev`, with the stage's environment, kept as a layer while its inputs do not
 * change), then the service started from there as the image's CMD starts it, against a fresh
 * database of the real PostgreSQL with JWT_SECRET set, and used: /ready, REST, the
 * dashboard's page and bundle, a function on the bundled Deno, storage, a migration of the
 * application's own, `npm run keys`, and a request that has the connection budget take the
 * owner pool's idle connection (`sql.evictIdle()`, which only the patched driver has). A file
 * the service reads at run time that the Dockerfile leaves out fails here.
 */
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { chainHash } from '../../src/host/migrate.ts';
import { serverUrl } from '../helpers/database.ts';
import { basePath, buildImage, bytesUnder, LAYER_CACHE, registryEnv } from '../helpers/image.ts';
import { freePort } from '../helpers/ports.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// The first install downloads the production dependencies (minutes); later runs take the layer.
t.setTimeout(1_200_000);

/** A condition that can no longer be met (the service exited): `until` gives up at once. */
class GaveUp extends Error {}

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    if (last instanceof GaveUp) throw last;
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms${last ? ` (${last instanceof Error ? last.message : JSON.stringify(last)})` : ''}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const APP_MIGRATION = `
create table public.notes (id int primary key, body text not null);
alter table public.notes enable row level security;
create policy notes_read on public.notes for select to anon using (true);
grant select on public.notes to anon;
insert into public.notes values (1, 'from the app''s migration');
insert into edge.functions (name, runtime) values ('hello', 'deno');
`;

const HELLO = `export default async (req: Request): Promise<Response> => {
  const { name = 'world' } = req.method === 'POST' ? await req.json() : {};
  return Response.json({ message: \`Hello, \${name}!\` });
};
`;

t.test('the image: laid out from the Dockerfile, installed, started as its CMD', { timeout: 1_200_000 }, async (t) => {
  const out = mkdtempSync(join(tmpdir(), 'plinth-image-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  // IMAGE_TEST_DOCKERFILE: another Dockerfile to play (to see this test fail when a COPY line is dropped).
  const other = process.env.IMAGE_TEST_DOCKERFILE;
  const dockerfile = other ? readFileSync(other, 'utf8') : undefined;
  const image = buildImage({ context: ROOT, out, dockerfile, baseEnv: { PATH: basePath(), HOME: process.env.HOME ?? '/root', ...registryEnv() }, cacheDir: LAYER_CACHE, note: (l) => t.comment(l) });
  t.comment(`the run-time stage's files: ${(bytesUnder(image.root) / 1e6).toFixed(0)} MB (node_modules ${(bytesUnder(join(image.workdir, 'node_modules')) / 1e6).toFixed(0)} MB)${image.cached ? '; install layer from the cache' : ''}`);
  t.equal(image.cmd[0], 'node', 'CMD runs node');
  t.ok(image.user !== null && !/^(root|0)(:|$)/.test(image.user), `as a user other than root (${image.user})`);

  // The driver the image runs is the patched one (patches/ is applied at npm ci).
  const driver = spawnSync(process.execPath, ['--input-type=module', '-e', "import postgres from 'postgres'; const s = postgres('postgres://x@127.0.0.1:1/x'); console.log(typeof s.evictIdle); await s.end();"], {
    cwd: image.workdir,
    encoding: 'utf8',
  });
  t.equal(driver.stdout.trim(), 'function', "the image's postgres driver has evictIdle: patches/ was applied by npm ci");

  // The application's own: a committed migration and a function, where compose mounts them.
  const migrations = join(image.workdir, 'migrations');
  mkdirSync(join(migrations, 'committed'), { recursive: true });
  writeFileSync(join(migrations, 'committed', '000001.sql'), `--! Previous: -\n--! Hash: ${chainHash(APP_MIGRATION, null)}\n\n${APP_MIGRATION.trim()}\n`);
  const functionsDir = image.env.FUNCTIONS_DIR ?? join(image.workdir, 'functions');
  mkdirSync(join(functionsDir, 'hello'), { recursive: true });
  writeFileSync(join(functionsDir, 'hello', 'index.ts'), HELLO);

  // A fresh database: the image's own migrations run at its start.
  const name = `image_${randomBytes(6).toString('hex')}`;
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  t.teardown(async () => {
    await admin.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
    await admin.end();
  });

  const home = join(image.root, 'home', 'node');
  mkdirSync(home, { recursive: true });
  const port = await freePort();
  const env: Record<string, string> = {
    PATH: basePath(),
    HOME: home,
    ...image.env,
    // What `docker run -e … -p …` adds: the database, the secret, a port of this machine.
    DATABASE_URL: serverUrl(name),
    JWT_SECRET: randomBytes(32).toString('hex'),
    HOST: '127.0.0.1',
    PORT: String(port),
    SHUTDOWN_GRACE_MS: '0',
    // One request connection: the owner pool's idle one is taken back for a REST request (sql.evictIdle()).
    DB_POOL_SIZE: '1',
  };

  // `npm run keys`, as `docker compose exec plinth npm run keys` runs it.
  const keys = spawnSync('npm', ['run', '-s', 'keys'], { cwd: image.workdir, env, encoding: 'utf8' });
  t.equal(keys.status, 0, `npm run keys in the image (${keys.stderr.trim()})`);
  const anonKey = /^ANON_KEY=(\S+)$/m.exec(keys.stdout)?.[1] ?? '';
  const serviceKey = /^SERVICE_ROLE_KEY=(\S+)$/m.exec(keys.stdout)?.[1] ?? '';
  t.ok(anonKey && serviceKey, 'it prints both keys');

  const child = spawn(image.cmd[0] === 'node' ? process.execPath : image.cmd[0], image.cmd.slice(1), { cwd: image.workdir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (d) => (log += d));
  child.stderr.on('data', (d) => (log += d));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await until('the service listens', async () => {
    if (child.exitCode !== null) throw new GaveUp(`the service exited ${child.exitCode}`);
    return /plinth listening on (\S+)/.exec(log)?.[1];
  }, 120_000).catch((err: Error) => {
    throw new Error(`${err.message}\n${log}`);
  });
  t.notOk(log.includes(serviceKey), 'the start prints no key (JWT_SECRET is set)');

  const ready = await until('/ready', async () => ((await fetch(`${url}/ready`)).status === 200 ? true : undefined));
  t.ok(ready, '/ready answers 200');

  // The owner pool's connection (settings), then an anon REST request: with one connection in the budget, the first is evicted for the second.
  const settings = await fetch(`${url}/api/settings`, { headers: { authorization: `Bearer ${serviceKey}` } });
  t.equal(settings.status, 200, 'the service-role key of npm run keys works (GET /api/settings)');
  const s = (await settings.json()) as { back_ends: { database: string }; migrations: { app: { name: string }[] } };
  t.same(
    s.migrations.app.map((m) => m.name),
    ['000001.sql'],
    "the application's committed migration was applied",
  );
  const notes = await fetch(`${url}/rest/v1/notes?select=id,body`, { headers: { apikey: anonKey } });
  t.equal(notes.status, 200, 'REST with the anon key of npm run keys');
  t.same(await notes.json(), [{ id: 1, body: "from the app's migration" }], "the application's table, over REST");

  for (const [path, type] of [
    ['/_/', /text\/html/],
    ['/_/app.js', /javascript/],
    ['/_/app.css', /text\/css/],
  ] as const) {
    const r = await fetch(url + path);
    const body = await r.text();
    t.equal(r.status, 200, `${path} 200`);
    t.match(r.headers.get('content-type'), type, `${path} type`);
    t.ok(body.length > (path === '/_/app.js' ? 10_000 : 100), `${path} has its content (${body.length} bytes)`);
  }

  const hello = await until(
    'the function answers',
    async () => {
      const r = await fetch(`${url}/functions/v1/hello`, { method: 'POST', headers: { apikey: anonKey, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'image' }) });
      const text = await r.text();
      return r.status === 200 ? text : undefined;
    },
    90_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${log}`);
  });
  t.same(JSON.parse(hello), { message: 'Hello, image!' }, 'a function on the bundled Deno');

  const auth = { authorization: `Bearer ${serviceKey}` };
  const bucket = await fetch(`${url}/storage/v1/bucket`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ id: 'files', public: false }) });
  t.equal(bucket.status, 201, 'a bucket is created');
  const up = await fetch(`${url}/storage/v1/object/files/a.txt`, { method: 'POST', headers: { ...auth, 'content-type': 'text/plain' }, body: 'kept in the image' });
  t.equal(up.status, 200, 'an object is uploaded');
  const down = await fetch(`${url}/storage/v1/object/files/a.txt`, { headers: auth });
  t.equal(await down.text(), 'kept in the image', 'and read back');

  child.kill('SIGTERM');
  t.equal(await exited, 0, 'docker stop (SIGTERM): the service drains and exits 0');
  t.notMatch(log, /"level":(50|60)/, 'no error was logged');
});
