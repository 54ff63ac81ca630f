/**
 * `npm run dev`'s watch on current.sql speaks in lines (src/cli/watch-log.ts): graphile-migrate's
 * run of the file, on a real database, through the logger the developer loop gives it: a save
 * that applies prints one line with its time, one that fails prints the file, the line and
 * column, and PostgreSQL's code and message; never a JSON line.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { watch } from 'graphile-migrate';
import { createLogger } from '../../src/core/log.ts';
import { migrateSettings } from '../../src/host/migrate.ts';
import { watchLogger } from '../../src/cli/watch-log.ts';
import { createTestDatabase } from '../helpers/database.ts';

t.test('a save that applies, one that fails', async (t) => {
  const db = await createTestDatabase(t);
  const dir = mkdtempSync(join(tmpdir(), 'plinth-watch-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'committed'));
  const lines: string[] = [];
  const settings = { ...migrateSettings(db.url, 'anonymous', createLogger('silent'), dir), logger: watchLogger('migrations/current.sql', (l) => lines.push(l)) };
  const save = async (text: string) => {
    lines.length = 0;
    writeFileSync(join(dir, 'current.sql'), text);
    await watch(settings, true).catch(() => {});
    return [...lines];
  };

  const ok = await save('create table if not exists public.watched (id int primary key);\n');
  t.equal(ok.length, 1, `one line for an applied save: ${JSON.stringify(ok)}`);
  t.match(ok[0], /^migrations: migrations\/current\.sql applied at \d\d:\d\d:\d\d \(\d+ ms\)$/, 'applied, with its time');
  const [{ n }] = await db.sql`select count(*)::int as n from pg_class where oid = 'public.watched'::regclass`;
  t.equal(n, 1, 'and it was applied');

  const same = await save('create table if not exists public.watched (id int primary key);\n');
  t.match(same, [/unchanged at \d\d:\d\d:\d\d: nothing to apply/], 'an unchanged file says so');

  const bad = await save('create table if not exists public.watched (id int primary key);\n\nselect nosuch from public.watched;\n');
  t.match(bad[0], /^migrations: migrations\/current\.sql:3:8 failed at \d\d:\d\d:\d\d: 42703 column "nosuch" does not exist$/, `file, line, column, PostgreSQL's message: ${bad[0]}`);
  t.notOk(bad.some((l) => l.startsWith('{') || l.includes('\\n')), 'no JSON, no escaped line breaks');

  const notNull = await save("create table if not exists public.watched2 (id int primary key, t text not null);\ninsert into public.watched2 (id) values (1);\n");
  t.match(notNull[0], /current\.sql failed at .*23502 null value in column "t"/, 'a NOT NULL violation');
  t.match(notNull.join('\n'), /detail: Failing row contains/, 'with its detail');

  // graphile-migrate's pool lets its connections go a moment after the run (dropping the
  // database under them would end the process): wait for that before the teardown.
  const until = Date.now() + 30_000;
  for (;;) {
    const [{ left }] = await db.sql`select count(*)::int as left from pg_stat_activity where datname = current_database() and application_name <> 'postgres.js' and pid <> pg_backend_pid()`;
    if (left === 0) break;
    if (Date.now() > until) throw new Error(`graphile-migrate still holds ${left} connections`);
    await new Promise((r) => setTimeout(r, 50));
  }
});
