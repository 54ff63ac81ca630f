/**
 * plinth/testing (src/testing) from the repository: an app's migrations folder applied to a
 * template keyed on its content, a database per startPlinth, sign-up, RLS over real HTTP,
 * and stop() dropping the database. test/package/install.test.ts runs it from an installed
 * package.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { startPlinth } from '../../src/testing/index.ts';
import { templateName } from '../../src/testing/template.ts';
import { serverUrl } from '../helpers/database.ts';

const app = mkdtempSync(join(tmpdir(), 'plinth-harness-'));
t.teardown(() => rmSync(app, { recursive: true, force: true }));
const migrations = join(app, 'migrations');
mkdirSync(join(migrations, 'committed'), { recursive: true });
// Work in progress (current.sql) is part of what the harness applies.
writeFileSync(
  join(migrations, 'current.sql'),
  `create table public.notes (
     id bigint generated always as identity primary key,
     owner uuid not null default auth.uid() references auth.users (id),
     body text not null);
   alter table public.notes enable row level security;
   create policy notes_owner on public.notes using (owner = auth.uid());
   grant select, insert on public.notes to authenticated;`,
);

t.test('the template is keyed on the app migrations', async (t) => {
  const before = templateName({ appFolder: migrations });
  t.equal(templateName({ appFolder: migrations }), before, 'same content, same template');
  writeFileSync(join(migrations, 'committed', 'x.sql'), '-- a change');
  t.not(templateName({ appFolder: migrations }), before, 'a changed folder, another template');
  rmSync(join(migrations, 'committed', 'x.sql'));
  t.not(templateName({ appFolder: null }), before, "without the app's migrations, another template");
});

t.test('two plinths, two databases, RLS with two users', async (t) => {
  const [p, q] = await Promise.all([startPlinth({ migrations, functions: join(app, 'functions') }), startPlinth({ migrations })]);
  t.not(p.database.name, q.database.name, 'each has its own database');
  const alice = await p.signUp('alice@example.com');
  const bob = await p.signUp('bob@example.com');
  const as = (u: { accessToken: string }) => ({ apikey: p.anonKey, authorization: `Bearer ${u.accessToken}`, 'content-type': 'application/json' });
  const made = await fetch(`${p.url}/rest/v1/notes`, { method: 'POST', headers: as(alice), body: JSON.stringify({ body: 'hello' }) });
  t.equal(made.status, 201);
  const seen = async (u: { accessToken: string }) => (await fetch(`${p.url}/rest/v1/notes?select=body`, { headers: as(u) })).json();
  t.same(await seen(alice), [{ body: 'hello' }], 'alice sees her note');
  t.same(await seen(bob), [], 'bob does not');
  t.same(await q.sql`select count(*)::int as n from public.notes`, [{ n: 0 }], "the other plinth's database holds none");
  const service = await fetch(`${q.url}/rest/v1/notes`, { headers: { apikey: q.serviceRoleKey, authorization: `Bearer ${q.serviceRoleKey}` } });
  t.equal(service.status, 200, 'the service-role key works on the other');
  await q.stop();
  await p.stop();
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  const left = await admin`select datname from pg_database where datname = any(${[p.database.name, q.database.name]})`;
  await admin.end();
  t.same(left, [], 'stop() drops the databases');
});
