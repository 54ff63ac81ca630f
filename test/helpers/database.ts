/**
 * Test databases: one migrated template per content of the SQL (committed migrations,
 * current.sql and its fixtures, the pgTAP helpers), built once and reused; each test file
 * clones it (`create database … template …`, fast) and drops its clone at teardown.
 * Several test runs at once share the template safely (an advisory lock guards the build).
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { createLogger } from '../../src/core/log.ts';
import { applyPlinthCurrent, MIGRATIONS_FOLDER, runAllMigrations } from '../../src/core/migrate.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const HELPERS_SQL = join(ROOT, 'test/sql/_helpers.sql');

/** The server tests run against: DATABASE_URL or PG* variables, else the local server. */
export function serverUrl(database = 'postgres'): string {
  const base = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  if (base) {
    const u = new URL(base);
    u.pathname = `/${database}`;
    return u.toString();
  }
  const host = process.env.PGHOST ?? '127.0.0.1';
  const port = process.env.PGPORT ?? '5432';
  const user = process.env.PGUSER ?? 'postgres';
  const password = process.env.PGPASSWORD ? `:${encodeURIComponent(process.env.PGPASSWORD)}` : '';
  return `postgres://${encodeURIComponent(user)}${password}@${host}:${port}/${database}`;
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else if (name.endsWith('.sql')) out.push(p);
  }
  return out;
}

export function templateName(): string {
  const h = createHash('sha1');
  for (const f of [...filesUnder(MIGRATIONS_FOLDER), HELPERS_SQL]) {
    h.update(f.slice(ROOT.length));
    h.update(readFileSync(f));
  }
  h.update(readFileSync(join(ROOT, 'node_modules/graphile-worker/package.json')));
  h.update(readFileSync(join(ROOT, 'src/core/migrate.ts'))); // how the chains are applied
  return `plinth_tpl_${h.digest('hex').slice(0, 12)}`;
}

const LOCK = 7_371_000_001;

/** Build the template for the current SQL if it does not exist yet; returns its name. */
export async function ensureTemplate(): Promise<string> {
  const name = templateName();
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  try {
    await admin`select pg_advisory_lock(${LOCK})`;
    const [exists] = await admin`select 1 from pg_database where datname = ${name}`;
    if (exists) return name;
    const building = `${name}_build`;
    await admin.unsafe(`drop database if exists ${building} with (force)`);
    await admin.unsafe(`create database ${building}`);
    const url = serverUrl(building);
    const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn');
    const db = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await db.unsafe(`create schema if not exists extensions;
        create extension if not exists pgtap schema extensions;
        create extension if not exists dblink schema extensions;`);
      await runAllMigrations(url, 'anonymous', log);
      // Work in progress in plinth's current.sql is part of what tests see.
      await applyPlinthCurrent(url, 'anonymous');
      await db.unsafe(readFileSync(HELPERS_SQL, 'utf8'));
    } finally {
      await db.end();
    }
    await admin.unsafe(`alter database ${building} rename to ${name}`);
    await admin.unsafe(`alter database ${name} is_template true`);
    await admin.unsafe(`comment on database ${name} is '${Math.floor(Date.now() / 1000)}'`);
    // Old templates (built from other SQL more than a day ago) go.
    const old = await admin<{ datname: string }[]>`
      select d.datname from pg_database d
      where d.datname like 'plinth\\_tpl\\_%' and d.datname <> ${name} and d.datname not like '%\\_build'
        and coalesce(nullif(shobj_description(d.oid, 'pg_database'), ''), '0')::bigint < extract(epoch from now()) - 86400`;
    for (const { datname } of old) {
      await admin.unsafe(`alter database ${datname} is_template false`).catch(() => {});
      await admin.unsafe(`drop database if exists ${datname}`).catch(() => {});
    }
    return name;
  } finally {
    await admin`select pg_advisory_unlock(${LOCK})`.catch(() => {});
    await admin.end();
  }
}

export interface TestDatabase {
  name: string;
  url: string;
  /** A superuser connection to this database, for setting up fixtures and checking results. */
  sql: postgres.Sql;
}

interface Teardownable {
  teardown(fn: () => unknown): void;
}

export interface ClonedDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** A fresh clone of the template, named `<prefix><random>`; the caller drops it. */
export async function cloneTemplate(prefix = 't_'): Promise<ClonedDatabase> {
  const template = await ensureTemplate();
  const name = `${prefix}${randomBytes(6).toString('hex')}`;
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.unsafe(`create database ${name} template ${template}`);
        break;
      } catch (err) {
        // "source database is being accessed by other users": another clone is in progress.
        if (attempt < 50 && (err as { code?: string }).code === '55006') {
          await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
          continue;
        }
        throw err;
      }
    }
  } finally {
    await admin.end();
  }
  return {
    name,
    url: serverUrl(name),
    async drop() {
      const a = postgres(serverUrl(), { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
      await a.end();
    },
  };
}

/** A fresh database cloned from the template, dropped when the test `t` ends. */
export async function createTestDatabase(t: Teardownable): Promise<TestDatabase> {
  const clone = await cloneTemplate('t_');
  const sql = postgres(clone.url, { max: 2, onnotice: () => {} });
  t.teardown(async () => {
    await sql.end({ timeout: 1 });
    await clone.drop();
  });
  return { name: clone.name, url: clone.url, sql };
}
