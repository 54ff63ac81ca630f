/**
 * Databases for tests: one migrated template per content of the SQL (graphile-worker's
 * schema, plinth's committed chain and its current.sql, an application's migrations, any
 * extra SQL), built once and reused; each caller clones it (`create database … template …`,
 * fast) and drops its clone. Several processes at once share the template safely (an
 * advisory lock guards the build). plinth's own tests (test/helpers/database.ts) and an
 * application's (`plinth/testing`) both use this module.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { createLogger } from '../core/log.ts';
import { appMigrations, applyPlinthCurrent, compileIncludes, MIGRATIONS_FOLDER, runAllMigrations } from '../host/migrate.ts';

const MIGRATE_TS = fileURLToPath(new URL('../host/migrate.ts', import.meta.url));
const ANONYMOUS = 'anonymous';

/** The server to clone on: TEST_DATABASE_URL, DATABASE_URL or the PG* variables, else the local server. */
export function serverUrl(database = 'postgres', env: NodeJS.ProcessEnv = process.env): string {
  const base = env.TEST_DATABASE_URL ?? env.DATABASE_URL;
  if (base) {
    const u = new URL(base);
    u.pathname = `/${database}`;
    return u.toString();
  }
  const host = env.PGHOST ?? '127.0.0.1';
  const port = env.PGPORT ?? '5432';
  const user = env.PGUSER ?? 'postgres';
  const password = env.PGPASSWORD ? `:${encodeURIComponent(env.PGPASSWORD)}` : '';
  return `postgres://${encodeURIComponent(user)}${password}@${host}:${port}/${database}`;
}

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else if (name.endsWith('.sql')) out.push(p);
  }
  return out;
}

export interface TemplateOptions {
  /** The application's graphile-migrate folder (committed/ and current.sql); null: none. */
  appFolder?: string | null;
  /** SQL run before the migrations (e.g. extensions the tests need). */
  before?: string;
  /** SQL files run after the migrations (e.g. pgTAP helpers). */
  afterFiles?: string[];
}

/** `plinth_tpl_<hash>`: the hash covers everything the template is built from. */
export function templateName(opts: TemplateOptions = {}): string {
  const h = createHash('sha1');
  for (const f of filesUnder(MIGRATIONS_FOLDER)) {
    if (f.endsWith('/schema.sql')) continue;
    h.update(relative(MIGRATIONS_FOLDER, f));
    h.update(readFileSync(f));
  }
  if (opts.appFolder) {
    for (const f of filesUnder(opts.appFolder)) {
      h.update('app:' + relative(opts.appFolder, f));
      h.update(readFileSync(f));
    }
  }
  h.update(opts.before ?? '');
  for (const f of opts.afterFiles ?? []) h.update(readFileSync(f));
  h.update(readFileSync(packageJson('graphile-worker')));
  h.update(readFileSync(MIGRATE_TS)); // how the chains are applied
  return `plinth_tpl_${h.digest('hex').slice(0, 12)}`;
}

/** A dependency's package.json (its version decides its schema), found from its entry point. */
function packageJson(name: string): string {
  let dir = dirname(createRequire(import.meta.url).resolve(name));
  while (!existsSync(join(dir, 'package.json')) || !dir.endsWith(name)) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`${name}: its package.json was not found`);
    dir = up;
  }
  return join(dir, 'package.json');
}

const LOCK = 7_371_000_001;

/** An application's current.sql (work in progress), with its includes, as one script. */
async function applyAppCurrent(url: string, folder: string): Promise<void> {
  const file = join(folder, 'current.sql');
  if (!existsSync(file)) return;
  const text = compileIncludes(readFileSync(file, 'utf8'), folder).replace(/:ANONYMOUS_ROLE\b/g, ANONYMOUS);
  if (!/\S/.test(text.replace(/--.*$/gm, ''))) return;
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.begin((tx) => tx.unsafe(text).simple());
  } finally {
    await sql.end({ timeout: 2 });
  }
}

async function build(url: string, opts: TemplateOptions): Promise<void> {
  const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn');
  const db = postgres(url, { max: 1, onnotice: () => {} });
  try {
    if (opts.before) await db.unsafe(opts.before);
    await runAllMigrations(url, ANONYMOUS, log);
    // Work in progress in plinth's current.sql is part of what tests see.
    await applyPlinthCurrent(url, ANONYMOUS);
    if (opts.appFolder && existsSync(opts.appFolder)) {
      if (existsSync(join(opts.appFolder, 'committed'))) await appMigrations(url, ANONYMOUS, log, opts.appFolder);
      await applyAppCurrent(url, opts.appFolder);
    }
    for (const f of opts.afterFiles ?? []) await db.unsafe(readFileSync(f, 'utf8'));
  } finally {
    await db.end();
  }
}

/** Build the template for the current SQL if it does not exist yet; returns its name. */
export async function ensureTemplate(opts: TemplateOptions = {}): Promise<string> {
  const name = templateName(opts);
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  try {
    await admin`select pg_advisory_lock(${LOCK})`;
    const [exists] = await admin`select 1 from pg_database where datname = ${name}`;
    if (exists) return name;
    const building = `${name}_build`;
    await admin.unsafe(`drop database if exists ${building} with (force)`);
    await admin.unsafe(`create database ${building}`);
    await build(serverUrl(building), opts);
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

export interface ClonedDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** A fresh clone of the template, named `<prefix><random>`; the caller drops it. */
export async function cloneTemplate(prefix = 't_', opts: TemplateOptions = {}): Promise<ClonedDatabase> {
  const template = await ensureTemplate(opts);
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
