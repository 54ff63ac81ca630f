/**
 * What the dashboard walks (browser.test.ts in Chromium, firefox.test.ts in Firefox) share:
 * a service as `npm run dev` runs it (development mode: no JWT_SECRET; MIGRATE_ON_START=false
 * because the migrations watch owns the database; MIGRATIONS_DIR a fresh folder), graphile-
 * migrate's watch run on current.sql once the dashboard appended to it (what the watch does on
 * a save), a backup folder with one finished base backup and two WAL segments, and checks of
 * the new table through REST under its owner-only policy.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { TestApp } from '../helpers/app.ts';
import { PASSWORD, uniqueEmail } from '../auth/helpers.ts';

interface TapLike {
  teardown(fn: () => unknown): void;
}

export const BACKUP_NAME = '20261128T030000Z';

export function walkFolders(t: TapLike, name: string): { migrations: string; backups: string; env: Record<string, string | undefined> } {
  const root = mkdtempSync(join(tmpdir(), `plinth-walk-${name}-`));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const migrations = join(root, 'migrations');
  mkdirSync(join(migrations, 'committed'), { recursive: true });
  writeFileSync(join(migrations, 'current.sql'), '-- Your migration in progress: npm run dev applies it on every save; npm run db:commit commits it.\n');
  const backups = join(root, 'backups');
  const base = join(backups, 'base', BACKUP_NAME);
  mkdirSync(join(base, 'data'), { recursive: true });
  writeFileSync(join(base, 'data', 'PG_VERSION'), '15\n');
  writeFileSync(join(base, 'backup.json'), JSON.stringify({ name: BACKUP_NAME, started_at: '2026-11-28T03:00:00.000Z', stopped_at: '2026-11-28T03:00:04.000Z', start_wal: '000000010000000000000002' }));
  mkdirSync(join(backups, 'wal'));
  writeFileSync(join(backups, 'wal', '000000010000000000000002'), Buffer.alloc(16384));
  writeFileSync(join(backups, 'wal', '000000010000000000000003'), Buffer.alloc(16384));
  return { migrations, backups, env: { JWT_SECRET: undefined, MIGRATE_ON_START: 'false', MIGRATIONS_DIR: migrations, BACKUP_DIR: backups } };
}

/** Wait until current.sql holds `text`, then run it as npm run dev's watch does on a save. */
export async function watchApplies(app: TestApp, migrations: string, text: string): Promise<string> {
  const file = join(migrations, 'current.sql');
  const deadline = Date.now() + 30_000;
  while (!readFileSync(file, 'utf8').includes(text)) {
    if (Date.now() > deadline) throw new Error(`current.sql never got ${text}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  applyCurrent(app, migrations);
  return readFileSync(file, 'utf8');
}

/** Run current.sql as the watch does on a save (test/dashboard/watch-once.ts); throws with its output when it fails. */
export function applyCurrent(app: TestApp, migrations: string): void {
  execFileSync(process.execPath, [fileURLToPath(new URL('./watch-once.ts', import.meta.url)), app.db.url, migrations, app.config.anonymousRole], { stdio: 'pipe' });
}

/** The table REST serves under its owner-only policy: each user sees their own rows only. */
export async function ownerOnlyServed(app: TestApp, table: string, column: string): Promise<{ own: unknown[]; other: unknown[] }> {
  const token = async () => {
    const email = uniqueEmail('owner');
    await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    const r = await app.call('POST', '/auth/v1/token?grant_type=password', { body: { grant_type: 'password', email, password: PASSWORD } });
    return r.body.access_token as string;
  };
  const a = await token();
  const b = await token();
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await app.call('POST', `/rest/v1/${table}`, { token: a, apikey: app.anonKey, body: { [column]: 'mine' } });
    if (r.status === 201) break;
    if (Date.now() > deadline) throw new Error(`REST never served ${table}: ${r.status} ${JSON.stringify(r.body)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const own = (await app.call('GET', `/rest/v1/${table}?select=${column}`, { token: a, apikey: app.anonKey })).body as unknown[];
  const other = (await app.call('GET', `/rest/v1/${table}?select=${column}`, { token: b, apikey: app.anonKey })).body as unknown[];
  return { own, other };
}
