/**
 * Development mode and the developer loop's database:
 * - the defaults of development mode (no JWT_SECRET): the SQL endpoint on (the dashboard's
 *   SQL view), no shutdown grace; with JWT_SECRET, off and 5 s; an explicit setting wins;
 * - a service handed the embedded database's URL (what `npm run dev` does) knows it is the
 *   embedded one: its banner shows that DATABASE_URL, as the embedded start does, and the
 *   dashboard's Settings say `embedded`; another database is `external`.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../../src/core/config.ts';
import { isEmbeddedUrl } from '../../src/host/embedded-url.ts';
import { startApp, TEST_JWT_SECRET } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

t.test('the defaults of development mode', async (t) => {
  t.equal(parseConfig({}).enableSqlEndpoint, true, 'the SQL endpoint is on in development mode');
  t.equal(parseConfig({}).shutdownGraceMs, 0, 'no shutdown grace in development mode');
  t.equal(parseConfig({ JWT_SECRET: TEST_JWT_SECRET }).enableSqlEndpoint, false, 'off with JWT_SECRET');
  t.equal(parseConfig({ JWT_SECRET: TEST_JWT_SECRET }).shutdownGraceMs, 5000, 'a 5 s grace with JWT_SECRET');
  t.equal(parseConfig({ ENABLE_SQL_ENDPOINT: 'false' }).enableSqlEndpoint, false, 'ENABLE_SQL_ENDPOINT=false wins');
  t.equal(parseConfig({ SHUTDOWN_GRACE_MS: '1500' }).shutdownGraceMs, 1500, 'SHUTDOWN_GRACE_MS wins');
});

/** DATA_DIR/postgres.json as the embedded start keeps it, for the database at `url`. */
function embeddedState(url: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-dev-mode-'));
  const u = new URL(url);
  writeFileSync(join(dir, 'postgres.json'), JSON.stringify({ password: decodeURIComponent(u.password), port: Number(u.port || 5432) }));
  return dir;
}

t.test('the embedded database, recognised from DATA_DIR/postgres.json', async (t) => {
  const db = await createTestDatabase(t);
  const dataDir = embeddedState(db.url);
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  t.ok(isEmbeddedUrl(db.url, dataDir), 'the URL of DATA_DIR/postgres.json');
  const other = new URL(db.url);
  other.port = '1';
  t.notOk(isEmbeddedUrl(other.toString(), dataDir), 'another port is not');
  t.notOk(isEmbeddedUrl(db.url, join(dataDir, 'nowhere')), 'nor anything without the state file');

  const app = await startApp(t, { db, env: { DATABASE_URL: db.url, DATA_DIR: dataDir }, worker: false });
  const s = await app.call('GET', '/api/settings', { token: app.serviceKey });
  t.equal(s.body.back_ends.database, 'embedded', 'Settings say embedded');
  const plain = await startApp(t, { db, env: { DATABASE_URL: db.url }, worker: false });
  t.equal((await plain.call('GET', '/api/settings', { token: plain.serviceKey })).body.back_ends.database, 'external', 'and external otherwise');

  // The banner of the service npm run dev starts (DATABASE_URL handed to it, JWT_SECRET unset).
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url, DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: '0', MIGRATE_ON_START: 'false', DB_POOL_SIZE: '2' },
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const until = Date.now() + 60_000;
  while (!/plinth listening on/.test(out) && child.exitCode === null && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  t.ok(out.includes(`DATABASE_URL=${db.url}  (embedded PostgreSQL, data in ${dataDir})`), `the banner shows the embedded database: ${out}`);
  t.match(out, /^SERVICE_ROLE_KEY=\S+$/m, 'and the keys');
  t.notMatch(out, /keys are not printed/, 'with no contradiction');
  child.kill('SIGINT');
  const code = await new Promise((r) => (child.exitCode !== null ? r(child.exitCode) : child.once('exit', r)));
  t.equal(code, 0, 'Ctrl-C stops it');
  t.match(out, /"grace_ms":0/, 'without a grace in development mode');
});
