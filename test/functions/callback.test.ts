/**
 * "Calling plinth back" (docs/api/functions.md) as written: the page's example function, read
 * from the page, runs in the bundled runtime with plinth's own port opened by
 * FUNCTIONS_ALLOW_NET as the page says; it reads its caller from `x-caller-claims` and calls
 * REST with the caller's token at PLINTH_URL, so each user gets their own notes (row-level
 * security) and an anonymous caller is refused.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { fencedBlocks } from '../docs/snippets.ts';
import { freePort } from '../helpers/ports.ts';
import { USER_A, USER_B, refresh, userToken } from '../rest/helpers.ts';

const page = readFileSync(fileURLToPath(new URL('../../docs/api/functions.md', import.meta.url)), 'utf8');
const example = fencedBlocks(page).filter((b) => b.text.startsWith('// functions/my-notes/index.ts\n'));
const dir = mkdtempSync(join(tmpdir(), 'plinth-callback-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const db = await createTestDatabase(t);
await db.sql.unsafe(`
  create table public.notes (id serial primary key, owner uuid not null default auth.uid(), title text not null);
  alter table public.notes enable row level security;
  create policy own on public.notes for select to authenticated using (owner = auth.uid());
  grant select on public.notes to authenticated;
  insert into public.notes (owner, title) values ('${USER_A}', 'a1'), ('${USER_A}', 'a2'), ('${USER_B}', 'b1');
  insert into edge.functions (name, runtime, verify_jwt) values ('my-notes', 'deno', false);
`);
const port = await freePort();
// As the page says: every host, and plinth's own port named on purpose.
const app = await startApp(t, { db, env: { FUNCTIONS_DIR: dir, PORT: String(port), FUNCTIONS_ALLOW_NET: `*,127.0.0.1:${port}` } });
await refresh(app);

t.test('the example reads its caller and calls REST as them', async (t) => {
  t.equal(example.length, 1, 'the page has the example');
  mkdirSync(join(dir, 'my-notes'), { recursive: true });
  writeFileSync(join(dir, 'my-notes', 'index.ts'), example[0].text);
  const a = await app.call('GET', '/functions/v1/my-notes', { token: await userToken(USER_A), apikey: app.anonKey });
  t.equal(a.status, 200, a.text);
  t.same({ user: a.body.user, titles: a.body.notes.map((n: { title: string }) => n.title).sort() }, { user: USER_A, titles: ['a1', 'a2'] }, "user A: A's notes");
  const b = await app.call('GET', '/functions/v1/my-notes', { token: await userToken(USER_B), apikey: app.anonKey });
  t.same({ user: b.body.user, titles: b.body.notes.map((n: { title: string }) => n.title) }, { user: USER_B, titles: ['b1'] }, "user B: B's notes");
  const anon = await app.call('GET', '/functions/v1/my-notes', { apikey: app.anonKey });
  t.same([anon.status, anon.body], [401, { error: 'sign in first' }], 'no signed-in caller: refused by the function');
});
