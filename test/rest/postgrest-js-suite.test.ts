/**
 * postgrest-js's own jest suite, run as its users run it: its test files unchanged, its
 * test schema loaded as the SQL a DBA would run, and its hard-coded server addresses
 * (http://localhost:3000 and :3001) forwarded to plinth by a loopback proxy that adds the
 * anon key and the `/rest/v1` prefix. The suite is vendored under test/vendor/postgrest-js
 * (MIT, its licence kept there); `PGJS_DIR` points at another checkout of the same layout.
 *
 * The tests that do not pass are listed in postgrest-js-ruled-out.ts with their reason (the
 * interface's rule, a cascade of one, or not yet) and in docs/api/rest.md ("postgrest-js's
 * own suite"); a test that passes where the list says it fails, or fails where it is not
 * listed, fails this file.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { refresh } from './helpers.ts';
import { startApp } from '../helpers/app.ts';
import { CASCADE, COMPAT_FAILING, NOT_YET, RULED_OUT } from './postgrest-js-ruled-out.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SUITE = process.env.PGJS_DIR ?? join(ROOT, 'test/vendor/postgrest-js');
const jestBin = process.env.PGJS_JEST ?? join(ROOT, 'node_modules/jest/bin/jest.js');

// jest runs some 200 tests against one server, one at a time: minutes on a loaded machine.
t.setTimeout(900_000);

if (!existsSync(join(SUITE, 'test')) || !existsSync(jestBin)) {
  t.fail(`postgrest-js's suite needs its files under ${SUITE} and jest installed`);
} else {
  // Twice, one after the other (both bind 3000/3001): the default mode, then SUPABASE_COMPAT=true.
  // PGJS_ONLY=default|compat runs one of them.
  const only = process.env.PGJS_ONLY;
  if (only !== 'compat') await t.test('default mode', (tt) => runSuite(tt, jestBin, false, new Map([...RULED_OUT, ...CASCADE, ...NOT_YET])));
  if (only !== 'default') await t.test('SUPABASE_COMPAT=true', (tt) => runSuite(tt, jestBin, true, COMPAT_FAILING));
}

/** The test schema as a DBA loads it into plinth's database: PostGIS only where the server has it. */
function schemaSql(hasPostgis: boolean): string {
  let schema = readFileSync(join(SUITE, 'test/db/00-schema.sql'), 'utf8');
  let data = readFileSync(join(SUITE, 'test/db/01-dummy-data.sql'), 'utf8');
  schema = schema.replace(/CREATE PUBLICATION supabase_realtime FOR ALL TABLES;/, '');
  schema = schema.replace('create schema extensions;', 'create schema if not exists extensions;');
  if (!hasPostgis) {
    schema = schema.replace('create extension postgis schema extensions;', '').replace('extensions.geometry(POINT, 4326)', 'text');
    data = data.replace('SRID=4326;POINT', 'POINT');
  }
  const grants = `
    grant usage on schema public, personal, extensions to anon, authenticated;
    grant all on all tables in schema public, personal to anon, authenticated;
    grant all on all sequences in schema public, personal to anon, authenticated;
    grant execute on all functions in schema public, personal to anon, authenticated;`;
  return `${schema}\n${data}\n${grants}`;
}

interface JestAssertion {
  ancestorTitles: string[];
  title: string;
  status: 'passed' | 'failed' | 'pending' | 'todo' | 'skipped';
  failureMessages: string[];
}
interface JestReport {
  numTotalTests: number;
  numPassedTests: number;
  numFailedTests: number;
  testResults: { name: string; assertionResults: JestAssertion[]; message: string }[];
}

/** A proxy on localhost:`port` (both loopback families) that sends each request on to plinth's REST root. */
async function forward(port: number, target: string, anonKey: string): Promise<() => Promise<void>> {
  const agent = new http.Agent({ keepAlive: true });
  const handler: http.RequestListener = (req, res) => {
    const u = new URL(`/rest/v1${req.url ?? '/'}`, target);
    const headers = { ...req.headers, host: u.host, apikey: anonKey };
    headers.authorization ??= `Bearer ${anonKey}`;
    const up = http.request(u, { method: req.method, headers, agent }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.writeHead(502).end());
    req.pipe(up);
  };
  const servers: http.Server[] = [];
  for (const host of ['127.0.0.1', '::1']) {
    const s = http.createServer(handler);
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, host, resolve);
    });
    servers.push(s);
  }
  return async () => {
    agent.destroy();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  };
}

async function runSuite(t: Test, jest: string, compat: boolean, expected: ReadonlyMap<string, string>): Promise<void> {
  const app = await startApp(t, {
    worker: false,
    env: {
      REST_TX_END: 'commit-allow-override',
      REST_AGGREGATES_ENABLED: 'true',
      REST_PLAN_ENABLED: 'true',
      REST_COMPUTED_FIELDS: 'true',
      DB_POOL_SIZE: '4',
      ...(compat ? { SUPABASE_COMPAT: 'true' } : {}),
    },
  });
  const [{ n }] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from pg_available_extensions where name = 'postgis'`;
  await app.db.sql.unsafe(schemaSql(n > 0)).simple();
  await refresh(app);
  const stops = [await forward(3000, app.url, app.anonKey), await forward(3001, app.url, app.anonKey)];
  t.teardown(async () => {
    for (const stop of stops) await stop();
  });

  const out = mkdtempSync(join(tmpdir(), 'pgjs-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const config = {
    rootDir: SUITE,
    testEnvironment: 'node',
    testMatch: ['<rootDir>/test/*.test.ts'],
    // ts-jest compiles each file alone (no type check: the suite's type tests are tstyche's, not jest's).
    transform: { '^.+\\.ts$': 'ts-jest' },
    globals: { 'ts-jest': { tsconfig: join(SUITE, 'tsconfig.test.json'), isolatedModules: true, diagnostics: false } },
    testSequencer: join(SUITE, 'test/testSequencer.js'),
    maxWorkers: 1,
    ci: true,
  };
  writeFileSync(join(out, 'jest.config.json'), JSON.stringify(config));
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn(process.execPath, [jest, '--config', join(out, 'jest.config.json'), '--runInBand', '--json', '--outputFile', join(out, 'report.json')], {
      cwd: SUITE,
      stdio: ['ignore', 'ignore', process.env.PGJS_VERBOSE ? 'inherit' : 'ignore'],
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    child.on('error', reject);
    child.on('exit', (c) => resolve(c ?? 1));
  });
  const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as JestReport;
  if (process.env.PGJS_REPORT) writeFileSync(process.env.PGJS_REPORT + (compat ? '.compat' : ''), JSON.stringify(report, null, 1));
  for (const file of report.testResults) {
    if (file.assertionResults.length === 0) t.fail(`${file.name} ran no test: ${file.message.slice(0, 500)}`);
  }
  const failed = new Set<string>();
  const passed = new Set<string>();
  for (const file of report.testResults) {
    const base = file.name.slice(file.name.lastIndexOf('/') + 1);
    const seen = new Map<string, number>();
    for (const a of file.assertionResults) {
      // A name the file gives two tests: the second is `name (2)`.
      const name = `${base} › ${[...a.ancestorTitles, a.title].join(' › ')}`;
      const nth = (seen.get(name) ?? 0) + 1;
      seen.set(name, nth);
      const id = nth === 1 ? name : `${name} (${nth})`;
      if (a.status === 'failed') failed.add(id);
      if (a.status === 'passed') passed.add(id);
      if (a.status === 'failed' && !expected.has(id)) t.fail(`${id}\n${a.failureMessages.join('\n').slice(0, 1500)}`);
    }
  }
  for (const id of expected.keys()) {
    if (passed.has(id)) t.fail(`listed as failing but passes: ${id}`);
    else if (!failed.has(id)) t.fail(`listed as failing but not in the suite: ${id}`);
  }
  const among = (m: Map<string, string>) => [...m.keys()].filter((id) => failed.has(id)).length;
  t.comment(
    compat
      ? `postgrest-js suite, SUPABASE_COMPAT=true: ${report.numPassedTests} of ${report.numTotalTests} passed; failed ${report.numFailedTests}, each listed; jest exit ${code}`
      : `postgrest-js suite: ${report.numPassedTests} of ${report.numTotalTests} passed; failed ${report.numFailedTests}: ` +
          `${among(RULED_OUT)} ruled out by the interface, ${among(CASCADE)} their cascades, ${among(NOT_YET)} not yet; jest exit ${code}`,
  );
  if (compat) t.ok(report.numPassedTests >= 200, 'at least 200 pass with SUPABASE_COMPAT=true');
  t.ok(report.numPassedTests > 0, 'the suite ran');
}
