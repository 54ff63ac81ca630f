/**
 * Two migration chains: plinth's own (sql/committed, history plinth_migrate.migrations) and
 * the application's (a graphile-migrate folder of its own, history graphile_migrate.migrations).
 * Each is upgraded without touching the other; a database migrated before the split (plinth's
 * chain in graphile-migrate's history) is carried over without loss.
 */
import t from 'tap';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { migrate as gmMigrate } from 'graphile-migrate';
import { runMigrations as workerMigrations } from 'graphile-worker';
import { chainHash, MIGRATIONS_FOLDER, migrateSettings, plinthChain, runAllMigrations } from '../../src/host/migrate.ts';
import { createLogger, workerLogger } from '../../src/core/log.ts';
import { serverUrl } from '../helpers/database.ts';

const log = createLogger('silent');

async function emptyDatabase(t: { teardown(fn: () => unknown): void }): Promise<{ url: string; sql: postgres.Sql }> {
  const name = `t_mig_${randomBytes(5).toString('hex')}`;
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  const url = serverUrl(name);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  t.teardown(async () => {
    await sql.end({ timeout: 1 });
    const a = postgres(serverUrl(), { max: 1, onnotice: () => {} });
    // graphile-migrate ends its pool without waiting: a connection it still holds, cut by
    // a forced drop, would raise an unhandled pool error in this process. Wait for it to go.
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const [{ n }] = await a<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where datname = ${name}`;
      if (n === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await a.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
    await a.end();
  });
  return { url, sql };
}

function tempDir(t: { teardown(fn: () => unknown): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-mig-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** An application chain as `npm run db:commit` writes it: committed files with graphile-migrate's headers. */
function appChain(dir: string, bodies: string[]): string {
  mkdirSync(join(dir, 'committed'), { recursive: true });
  writeFileSync(join(dir, 'current.sql'), '-- nothing in progress\n');
  let previous: string | null = null;
  bodies.forEach((body, i) => {
    const hash = chainHash(body, previous);
    writeFileSync(join(dir, 'committed', `${String(i + 1).padStart(6, '0')}.sql`), `--! Previous: ${previous ?? '-'}\n--! Hash: ${hash}\n\n${body.trim()}\n`);
    previous = hash;
  });
  return dir;
}

const TODOS = `create table public.todos (
  id bigint generated always as identity primary key,
  owner uuid not null default auth.uid() references auth.users (id),
  title text not null
);
alter table public.todos enable row level security;
create policy own on public.todos for all to authenticated using (owner = auth.uid());
grant select, insert on public.todos to authenticated;`;

const plinthFiles = plinthChain();

t.test('an older plinth with app migrations on top, then a newer plinth migration: both chains complete', async (t) => {
  const db = await emptyDatabase(t);
  const older = tempDir(t);
  mkdirSync(join(older, 'committed'));
  const all = readdirSync(join(MIGRATIONS_FOLDER, 'committed')).sort();
  for (const f of all.slice(0, -1)) cpSync(join(MIGRATIONS_FOLDER, 'committed', f), join(older, 'committed', f));
  const app = appChain(tempDir(t), [TODOS, `alter table public.todos add column done boolean not null default false;`]);

  await runAllMigrations(db.url, 'anonymous', log, { plinthFolder: older, appFolder: app });
  const plinthRows = async () => (await db.sql<{ filename: string }[]>`select filename from plinth_migrate.migrations order by 1`).map((r) => r.filename);
  const appRows = async () => (await db.sql<{ filename: string }[]>`select filename from graphile_migrate.migrations order by 1`).map((r) => r.filename);
  t.same(await plinthRows(), plinthFiles.slice(0, -1).map((f) => f.filename), 'plinth at the older level');
  t.same(await appRows(), ['000001.sql', '000002.sql'], "the application's chain in its own history");

  // The upgrade: plinth's newer migration, the application's chain untouched.
  await runAllMigrations(db.url, 'anonymous', log, { appFolder: app });
  t.same(await plinthRows(), plinthFiles.map((f) => f.filename), "plinth's chain complete");
  t.same(await appRows(), ['000001.sql', '000002.sql'], "the application's history unchanged");
  const [col] = await db.sql`select 1 from information_schema.columns where table_name = 'todos' and column_name = 'done'`;
  t.ok(col, "the application's tables are there");

  // The application's next migration leaves plinth's chain alone.
  const app3 = appChain(app, [TODOS, `alter table public.todos add column done boolean not null default false;`, `create index on public.todos (owner);`]);
  await runAllMigrations(db.url, 'anonymous', log, { appFolder: app3 });
  t.same(await appRows(), ['000001.sql', '000002.sql', '000003.sql']);
  t.same(await plinthRows(), plinthFiles.map((f) => f.filename));
});

t.test('a database migrated before the chains were split is carried over without loss', async (t) => {
  const db = await emptyDatabase(t);
  // The old way: graphile-worker's schema, then plinth's folder through graphile-migrate.
  await workerMigrations({ connectionString: db.url, logger: workerLogger(log) });
  await gmMigrate(migrateSettings(db.url, 'anonymous', log, MIGRATIONS_FOLDER));
  const before = await db.sql<{ filename: string; date: Date }[]>`select filename, date from graphile_migrate.migrations order by 1`;
  t.equal(before.length, plinthFiles.length, "old layout: plinth's chain in graphile-migrate's history");
  await db.sql`create table public.kept (id int)`;
  await db.sql`insert into public.kept values (42)`;

  const app = appChain(tempDir(t), [TODOS]);
  await runAllMigrations(db.url, 'anonymous', log, { appFolder: app });
  const moved = await db.sql<{ filename: string; applied_at: Date }[]>`select filename, applied_at from plinth_migrate.migrations order by 1`;
  t.same(moved.map((r) => r.filename), before.map((r) => r.filename), "plinth's rows moved to its own history");
  t.same(moved.map((r) => r.applied_at.getTime()), before.map((r) => r.date.getTime()), 'with their dates');
  t.same((await db.sql`select filename from graphile_migrate.migrations`).map((r) => r.filename), ['000001.sql'], "graphile-migrate's history now holds the application's chain alone");
  t.same(await db.sql`select id from public.kept`, [{ id: 42 }], 'data kept');

  // Idempotent: a second start changes nothing.
  await runAllMigrations(db.url, 'anonymous', log, { appFolder: app });
  t.equal((await db.sql`select count(*)::int as n from plinth_migrate.migrations`)[0].n, plinthFiles.length);
});

t.test("app migrations committed into plinth's folder: the start stops and says what to do", async (t) => {
  const db = await emptyDatabase(t);
  await workerMigrations({ connectionString: db.url, logger: workerLogger(log) });
  const mixed = tempDir(t);
  cpSync(MIGRATIONS_FOLDER, mixed, { recursive: true });
  const last = plinthFiles.at(-1)!;
  const body = 'create table public.mine (id int);';
  const hash = chainHash(body, last.hash);
  const next = String(plinthFiles.length + 1).padStart(6, '0');
  writeFileSync(join(mixed, 'committed', `${next}.sql`), `--! Previous: ${last.hash}\n--! Hash: ${hash}\n\n${body}\n`);
  await gmMigrate(migrateSettings(db.url, 'anonymous', log, mixed));
  const err = await runAllMigrations(db.url, 'anonymous', log, {}).then(() => null, (e: Error) => e);
  t.match(err?.message, new RegExp(`not plinth's \\(${next}\\.sql\\).*MIGRATIONS_DIR`), 'names the foreign migration and the fix');
  t.same((await db.sql`select count(*)::int as n from graphile_migrate.migrations`)[0], { n: plinthFiles.length + 1 }, 'nothing moved');
});

t.test('a committed file edited afterwards is refused', async (t) => {
  const dir = tempDir(t);
  cpSync(MIGRATIONS_FOLDER, dir, { recursive: true });
  const f = join(dir, 'committed', readdirSync(join(dir, 'committed')).sort()[1]);
  writeFileSync(f, readFileSync(f, 'utf8') + '\nselect 1;\n');
  t.throws(() => plinthChain(dir), /edited after it was committed/);
});
