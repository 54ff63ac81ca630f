/**
 * The keys reach whoever runs the service:
 * - a start in development mode (JWT_SECRET unset) against a DATABASE_URL prints the full keys
 *   and the dashboard's setup link, and they work (REST with the anon key, a service-role
 *   endpoint with the other, the link creates the first admin);
 * - with JWT_SECRET set the start prints fingerprints only, and `npm run keys` (same
 *   environment) prints the keys themselves: the ones the fingerprints are of, and they work.
 */
import t, { type Test } from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { TEST_JWT_SECRET } from '../helpers/app.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const fingerprint = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 8);

async function waitFor(cond: () => boolean, what: () => string, ms = 60_000): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`not met in time: ${what()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** `node src/main.ts` with `env`; resolves once its banner is out. */
async function start(t: Test, env: Record<string, string>): Promise<{ out: () => string; url: string }> {
  const child = spawn(process.execPath, ['src/main.ts'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', DB_POOL_SIZE: '2', MIGRATE_ON_START: 'false', ...env } });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  // The banner is one write of a few hundred bytes: it arrives whole.
  await waitFor(() => /plinth listening on \S+\n/.test(out) || child.exitCode !== null, () => out);
  if (child.exitCode !== null) throw new Error(`the start failed:\n${out}`);
  return { out: () => out, url: /plinth listening on (\S+)/.exec(out)![1] };
}

async function table(db: TestDatabase): Promise<void> {
  await db.sql.unsafe(`create table public.kept (id int primary key); grant select on public.kept to anon; insert into public.kept values (7);`);
}

async function keysWork(t: Test, url: string, anonKey: string, serviceKey: string): Promise<void> {
  const rest = await fetch(`${url}/rest/v1/kept?select=id`, { headers: { apikey: anonKey, authorization: `Bearer ${anonKey}` } });
  t.equal(rest.status, 200, 'the anon key works on REST');
  t.same(await rest.json(), [{ id: 7 }]);
  const settings = await fetch(`${url}/api/settings`, { headers: { authorization: `Bearer ${serviceKey}` } });
  t.equal(settings.status, 200, 'the service-role key works on a service-role endpoint');
  const wrong = await fetch(`${url}/api/settings`, { headers: { authorization: `Bearer ${anonKey}` } });
  t.equal(wrong.status, 403, 'and the anon key does not');
}

t.test('development mode with DATABASE_URL: the keys and the setup link are printed, and work', async (t) => {
  const db = await createTestDatabase(t);
  await table(db);
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-keys-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const { out, url } = await start(t, { DATABASE_URL: db.url, DATA_DIR: dataDir });
  const anonKey = /^ANON_KEY=(\S+)$/m.exec(out())?.[1];
  const serviceKey = /^SERVICE_ROLE_KEY=(\S+)$/m.exec(out())?.[1];
  if (!anonKey || !serviceKey) throw new Error(`no keys in:\n${out()}`);
  await keysWork(t, url, anonKey, serviceKey);
  const link = /create one within the hour at (\S+\/_\/#\/setup\?token=(\S+))/.exec(out());
  t.ok(link, 'the setup link is printed');
  const setup = await fetch(`${url}/api/dashboard/setup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token: link![2], email: 'admin@example.com', password: 'correct horse battery' }),
  });
  t.equal(setup.status, 201, 'and it creates the first admin');

  const keys = spawnSync('npm', ['run', '-s', 'keys'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url, DATA_DIR: dataDir }, encoding: 'utf8' });
  t.equal(keys.stdout, `ANON_KEY=${anonKey}\nSERVICE_ROLE_KEY=${serviceKey}\n`, 'npm run keys prints the same keys, from the development secret under DATA_DIR');
});

t.test('JWT_SECRET set: fingerprints at the start, the keys from npm run keys', async (t) => {
  const db = await createTestDatabase(t);
  await table(db);
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-keys-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const env = { DATABASE_URL: db.url, DATA_DIR: dataDir, JWT_SECRET: TEST_JWT_SECRET };
  const { out, url } = await start(t, env);
  t.notMatch(out(), /^(ANON_KEY|SERVICE_ROLE_KEY)=/m, 'no key printed by the start');
  t.notMatch(out(), /setup\?token=/, 'nor the setup link');
  t.match(out(), /npm run keys/, 'the start says where the keys are');
  const keys = spawnSync('npm', ['run', '-s', 'keys'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' });
  t.equal(keys.status, 0, 'npm run keys');
  const anonKey = /^ANON_KEY=(\S+)$/m.exec(keys.stdout)?.[1] ?? '';
  const serviceKey = /^SERVICE_ROLE_KEY=(\S+)$/m.exec(keys.stdout)?.[1] ?? '';
  t.ok(out().includes(`ANON_KEY sha256:${fingerprint(anonKey)}`), "the anon key's fingerprint is the start's");
  t.ok(out().includes(`SERVICE_ROLE_KEY sha256:${fingerprint(serviceKey)}`), "the service-role key's too");
  await keysWork(t, url, anonKey, serviceKey);
  t.notOk(keys.stdout.includes(TEST_JWT_SECRET) || keys.stderr.includes(TEST_JWT_SECRET), 'never the secret itself');
});
