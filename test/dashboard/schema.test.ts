/**
 * The dashboard's schema changes (POST /api/dashboard/schema): SQL built from checked actions,
 * shown first; in development (npm run dev: development mode with MIGRATE_ON_START=false)
 * appended to MIGRATIONS_DIR/current.sql, which graphile-migrate's watch applies, after which
 * REST serves the table; against a production database never written nor run (409). Also the
 * endpoints the other new views read: schedules paused and resumed, /api/backups over a
 * backup folder, and the per-minute request counts without the dashboard's own requests.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { createLogger } from '../../src/core/log.ts';
import { applyCurrent } from './walk.ts';
import { folderStore, scheduleBackups } from '../../src/host/backup.ts';
import { noteBackupFailure } from '../../src/dashboard/backups.ts';

const OWNED = [
  {
    action: 'create_table',
    table: 'notes',
    columns: [
      { name: 'id', type: 'bigint', identity: true, primary_key: true },
      { name: 'body', type: 'text', nullable: false, default: "''" },
      { name: 'tags', type: 'text[]', default: "'{}'::text[]" },
      { name: 'owner', type: 'uuid', nullable: false, default: 'auth.uid()', references: { table: 'auth.users', column: 'id', on_delete: 'cascade' } },
    ],
  },
  { action: 'policy', table: 'notes', template: 'owner_only', owner_column: 'owner' },
  { action: 'grant', table: 'notes', roles: ['authenticated'], privileges: ['select', 'insert', 'update', 'delete'] },
];

t.test('production: the SQL is shown, never written nor run', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-schema-prod-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const app = await startApp(t, { worker: false, env: { MIGRATIONS_DIR: dir } });
  const shown = await app.call('POST', '/api/dashboard/schema', { token: app.serviceKey, body: { actions: OWNED } });
  t.equal(shown.status, 200);
  t.equal(shown.body.mode, 'production');
  t.match(shown.body.sql, /create table if not exists public\.notes \(\n {2}id bigint generated always as identity,/);
  t.match(shown.body.sql, /owner uuid default auth\.uid\(\) not null references auth\.users \(id\) on delete cascade/);
  t.match(shown.body.sql, /create policy notes_owner_only on public\.notes for all to authenticated\n {2}using \(owner = auth\.uid\(\)\) with check \(owner = auth\.uid\(\)\);/);
  t.match(shown.body.sql, /grant select, insert, update, delete on public\.notes to authenticated;/);
  const applied = await app.call('POST', '/api/dashboard/schema', { token: app.serviceKey, body: { actions: OWNED, apply: true } });
  t.equal(applied.status, 409);
  t.match(applied.body.error, /only in development \(npm run dev\)/);
  const [exists] = await app.db.sql`select to_regclass('public.notes') as r`;
  t.equal(exists.r, null, 'nothing ran');
  t.throws(() => readFileSync(join(dir, 'current.sql')), 'nothing written');

  const bad = async (actions: unknown, error: string) => {
    const r = await app.call('POST', '/api/dashboard/schema', { token: app.serviceKey, body: { actions } });
    t.same([r.status, r.body], [400, { error }], error);
  };
  const column = (c: Record<string, unknown>) => [{ action: 'add_column', table: 'x', column: { name: 'a', type: 'text', ...c } }];
  await bad(column({ type: 'text; drop table auth.users' }), 'action 1: unknown type');
  await bad(column({ type: 'nosuchtype' }), 'action 1: unknown type');
  await bad(column({ default: "(select string_agg(email, ',') from auth.users)" }), 'action 1: a default is a literal, now(), current_date, gen_random_uuid() or auth.uid()');
  await bad(column({ default: "'a'; drop table x; --" }), 'action 1: a default is a literal, now(), current_date, gen_random_uuid() or auth.uid()');
  await bad(column({ name: 'A"b' }), 'action 1: names are lower-case letters, digits and _ (at most 63, not starting with a digit)');
  await bad(column({ references: { table: 'nope', column: 'id' } }), 'action 1: a foreign key names a column of a table of public, or auth.users(id)');
  await bad([{ action: 'policy', table: 'x', template: 'everything', owner_column: 'owner' }], 'action 1: policy templates are owner_only and read_all_write_owner');
  await bad([{ action: 'enable_rls', table: 'x' }, { action: 'grant', table: 'x', roles: ['postgres'], privileges: ['select'] }], 'action 2: grants name anon, authenticated or service_role and select, insert, update or delete');
  await bad([{ action: 'truncate', table: 'x' }], 'action 1: unknown action or missing fields');
  const shape = await app.call('POST', '/api/dashboard/schema', { token: app.serviceKey, body: { actions: 'create table x()' } });
  t.same([shape.status, shape.body], [400, { error: 'invalid request body' }]);
  const anon = await app.call('POST', '/api/dashboard/schema', { token: app.anonKey, body: { actions: OWNED } });
  t.equal(anon.status, 403, 'the service role only');
});

t.test('development: appended to current.sql, applied by the watch, served by REST; safe to run again', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-schema-dev-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'committed'));
  writeFileSync(join(dir, 'current.sql'), '-- Your migration in progress\n');
  // What npm run dev gives the service: no JWT_SECRET (development mode), the watch owns migrations.
  const app = await startApp(t, { worker: false, env: { JWT_SECRET: undefined, MIGRATE_ON_START: 'false', MIGRATIONS_DIR: dir } });
  const settings = await app.call('GET', '/api/settings', { token: app.serviceKey });
  t.equal(settings.body.schema_changes, 'migrations/current.sql');
  const r = await app.call('POST', '/api/dashboard/schema', { token: app.serviceKey, body: { actions: OWNED, apply: true } });
  t.equal(r.status, 200);
  t.equal(r.body.mode, 'development');
  t.equal(r.body.appended, true);
  const file = readFileSync(join(dir, 'current.sql'), 'utf8');
  t.ok(file.startsWith('-- Your migration in progress\n\n-- from the dashboard, '), 'appended after what was there');
  t.ok(file.includes(r.body.sql), 'the SQL shown is the SQL written');

  applyCurrent(app, dir); // what npm run dev's watch does on the save
  const [rls] = await app.db.sql`select relrowsecurity from pg_class where oid = 'public.notes'::regclass`;
  t.equal(rls.relrowsecurity, true, 'the table is there with RLS');
  const rename = await app.call('POST', '/api/dashboard/schema', {
    token: app.serviceKey,
    body: { apply: true, actions: [{ action: 'rename_column', table: 'notes', column: 'body', to: 'text' }, { action: 'add_column', table: 'notes', column: { name: 'done', type: 'boolean', nullable: false, default: 'false' } }, { action: 'drop_column', table: 'notes', column: 'tags' }] },
  });
  t.equal(rename.status, 200);
  applyCurrent(app, dir);
  applyCurrent(app, dir);
  t.pass('the whole current.sql runs again without error (the watch re-runs it on every save)');
  const cols = await app.db.sql`select column_name from information_schema.columns where table_schema = 'public' and table_name = 'notes' order by ordinal_position`;
  t.same(cols.map((c) => c.column_name), ['id', 'text', 'owner', 'done']);
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  const rest = await app.call('GET', '/rest/v1/notes?select=id,text,done', { token: app.serviceKey });
  t.same([rest.status, rest.body], [200, []], 'REST serves the new table');
});

t.test('schedules paused and resumed; backups listed; the chart counts without the dashboard', async (t) => {
  const backups = mkdtempSync(join(tmpdir(), 'plinth-schema-backups-'));
  t.teardown(() => rmSync(backups, { recursive: true, force: true }));
  const app = await startApp(t, { worker: false, env: { BACKUP_DIR: backups, BACKUP_RETENTION_DAYS: '3' } });
  await app.db.sql.unsafe(`create function public.tick(p jsonb) returns void language sql as $$ select null::void $$`).simple();
  const made = await app.call('POST', '/api/schedules', { token: app.serviceKey, body: { name: 'nightly', cron: '0 3 * * *', target: 'sql:public.tick' } });
  t.equal(made.status, 201);
  t.equal(made.body.paused, false);
  const paused = await app.call('POST', '/api/schedules/nightly/pause', { token: app.serviceKey });
  t.same([paused.status, paused.body.paused, paused.body.next_run_at], [200, true, null], 'paused: no pending tick');
  const jobs = async () => (await app.db.sql`select count(*)::int as n from graphile_worker.jobs where key = 'plinth:schedule:nightly'`)[0].n as number;
  t.equal(await jobs(), 0);
  const again = await app.call('POST', '/api/schedules', { token: app.serviceKey, body: { name: 'nightly', cron: '0 4 * * *', target: 'sql:public.tick' } });
  t.same([again.body.paused, await jobs()], [true, 0], 'changing a paused schedule keeps it paused');
  const resumed = await app.call('POST', '/api/schedules/nightly/resume', { token: app.serviceKey });
  t.equal(resumed.body.paused, false);
  t.ok(resumed.body.next_run_at, 'armed again');
  t.equal(await jobs(), 1);
  const missing = await app.call('POST', '/api/schedules/nope/pause', { token: app.serviceKey });
  t.same([missing.status, missing.body], [404, { error: 'schedule not found' }]);

  const empty = await app.call('GET', '/api/backups', { token: app.serviceKey });
  t.same([empty.status, empty.body.enabled, empty.body.base, empty.body.restorable.from], [200, true, [], null]);
  mkdirSync(join(backups, 'base/20261128T030000Z/data'), { recursive: true });
  writeFileSync(join(backups, 'base/20261128T030000Z/data/PG_VERSION'), '15\n');
  writeFileSync(
    join(backups, 'base/20261128T030000Z/backup.json'),
    JSON.stringify({ name: '20261128T030000Z', started_at: '2026-11-28T03:00:00.000Z', stopped_at: '2026-11-28T03:00:05.000Z', start_wal: '000000010000000000000002' }),
  );
  mkdirSync(join(backups, 'base/20261128T040000Z'), { recursive: true }); // unfinished: no backup.json
  mkdirSync(join(backups, 'wal'));
  writeFileSync(join(backups, 'wal/000000010000000000000002'), Buffer.alloc(4096));
  writeFileSync(join(backups, 'wal/000000010000000000000003'), Buffer.alloc(1024));
  const listed = await app.call('GET', '/api/backups', { token: app.serviceKey });
  t.equal(listed.body.base.length, 1, 'finished base backups only');
  t.ok(listed.body.base[0].bytes > 3, 'with its size');
  t.same(listed.body.wal.segments, 2);
  t.same(listed.body.wal.bytes, 5120);
  t.equal(listed.body.restorable.from, '2026-11-28T03:00:05.000Z');
  t.equal(listed.body.env, `BACKUP_DIR=${backups}`);
  t.equal(listed.body.retention_days, 3);
  t.equal(listed.body.last_error, null);
  // A base backup that fails (the server cannot be reached) is the last error shown, as src/boot.ts wires it.
  let failed = false;
  const schedule = scheduleBackups({
    store: folderStore(mkdtempSync(join(tmpdir(), 'plinth-schema-failing-'))),
    spool: null,
    dataDir: tmpdir(),
    adminUrl: 'postgres://postgres@127.0.0.1:1/postgres',
    intervalMs: 3_600_000,
    retentionDays: 1,
    log: createLogger('silent'),
    onFailed: (err) => {
      noteBackupFailure(err);
      failed = true;
    },
  });
  const until = Date.now() + 30_000;
  while (!failed && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  await schedule.stop();
  await schedule.close();
  const withError = await app.call('GET', '/api/backups', { token: app.serviceKey });
  t.match(withError.body.last_error, { at: String, message: /ECONNREFUSED|connect/ }, 'the last failure, with its time and message');
  t.equal((await app.call('GET', '/api/backups', { token: app.anonKey })).status, 403);

  await app.call('GET', '/rest/v1/no_such_table', { token: app.serviceKey });
  await app.call('GET', '/rest/v1/no_such_table', { token: app.serviceKey, headers: { 'x-request-id': 'dashboard-0123' } });
  const minutes = await app.call('GET', '/api/requests/minutes', { token: app.serviceKey });
  t.equal(minutes.body.minutes.length, 60, 'one row per minute of the last hour');
  const sum = (rows: { requests: number }[]) => rows.reduce((n, m) => n + m.requests, 0);
  const own = await app.call('GET', '/api/requests/minutes?source=dashboard', { token: app.serviceKey });
  t.equal(sum(own.body.minutes), 1, "the dashboard's own request, apart");
  const now = minutes.body.minutes.at(-1);
  t.ok(now.requests >= 1 && now.p95_ms > 0, 'this minute has the app requests and a p95');
  const bad = await app.call('GET', '/api/requests/minutes?source=everyone', { token: app.serviceKey });
  t.same([bad.status, bad.body], [400, { error: 'source must be app or dashboard' }]);
});
