/**
 * `npm run gen:types` (issue 17): the script writes the `Database` type of the test fixtures
 * from the REST catalog, and a small program using `@supabase/postgrest-js` generics with it
 * type-checks (`tsc --noEmit`), while a wrong use of the same types is refused.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { restApp } from './helpers.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const app = await restApp(t);

/** Runs a child process to its end, killed after `limitMs` (the file's own limit is 180 s). */
function run(cmd: string, args: string[], limitMs: number, env: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, out });
    });
  });
}

// Inside the repository, so the program resolves @supabase/postgrest-js from node_modules.
const dir = mkdtempSync(join(ROOT, '.tmp-types-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const PROGRAM = `
import { PostgrestClient } from '@supabase/postgrest-js';
import type { Database, Enums, Tables, TablesInsert } from './database.ts';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function expectType<T extends true>(): T | undefined {
  return undefined;
}

const client = new PostgrestClient<Database>('http://localhost/rest/v1');

export async function main(): Promise<void> {
  const authors = await client.from('authors').select('id, name, born, tags, meta, rating, mood, books(title, pages)');
  if (authors.data !== null) {
    const a = authors.data[0];
    expectType<Equal<typeof a.id, number>>();
    expectType<Equal<typeof a.name, string>>();
    expectType<Equal<typeof a.born, string | null>>();
    expectType<Equal<typeof a.tags, string[]>>();
    expectType<Equal<typeof a.rating, number | null>>();
    expectType<Equal<typeof a.mood, 'happy' | 'sad' | 'ok' | null>>();
    expectType<Equal<typeof a.books, { title: string; pages: number | null }[]>>();
  }
  const book = await client.from('books').select('id, author:authors(name)').eq('id', 1).single();
  if (book.data !== null) expectType<Equal<typeof book.data.author, { name: string } | null>>();
  const profile = await client.from('authors').select('author_profiles(bio)').limit(1).single();
  if (profile.data !== null) expectType<Equal<typeof profile.data.author_profiles, { bio: string | null } | null>>();
  const view = await client.from('book_titles').select('id, title');
  if (view.data !== null) expectType<Equal<typeof view.data[0]['title'], string | null>>();

  await client.from('books').insert({ title: 'x', pages: 1 });
  await client.from('books').update({ pages: 2 }).eq('id', 1);
  const row: TablesInsert<'authors'> = { name: 'n', mood: 'sad' };
  const mood: Enums<'mood'> = 'ok';
  const author: Tables<'authors'>['nick'] = null;

  const sum = await client.rpc('add', { a: 1, b: 2 });
  if (sum.data !== null) expectType<Equal<typeof sum.data, number>>();
  const greet = await client.rpc('greet', { name: 'x' });
  if (greet.data !== null) expectType<Equal<typeof greet.data, string>>();
  const set = await client.rpc('authors_born_after', { d: '1900-01-01' });
  if (set.data !== null) expectType<Equal<typeof set.data[0]['id'], number>>();
  void row;
  void mood;
  void author;
}
`;

// Each line is one mistake tsc must refuse (and nothing else in the file may fail).
const WRONG = `
import type { Database, Tables, TablesInsert } from './database.ts';
export const a: Tables<'authors'>['id'] = 'not a number';
export const b: Tables<'authors'>['mood'] = 'angry';
export const c: TablesInsert<'books'> = { pages: 1 };
export const d: Database['public']['Functions']['add']['Args'] = { a: 1 };
export const e: Tables<'nosuch'> = {};
`;

t.test('gen:types writes the Database type and a postgrest-js program type-checks against it', async (t) => {
  const out = join(dir, 'database.ts');
  const gen = await run(process.execPath, ['bin/plinth.js', 'gen', 'types', '--out', out], 30_000, { DATABASE_URL: app.db.url });
  t.equal(gen.code, 0, gen.out);
  const text = readFileSync(out, 'utf8');
  t.match(text, /export type Database = \{/);
  t.match(text, /"authors": \{\n\s+Row: \{/, 'tables');
  t.match(text, /"book_titles": \{/, 'views');
  t.match(text, /"mood": "happy" \| "sad" \| "ok"/, 'enums with their labels');
  t.match(text, /foreignKeyName: "books_author_id_fkey"/, 'relationships');
  t.notMatch(text, /"batch"/, 'service route names are not tables');

  writeFileSync(join(dir, 'program.ts'), PROGRAM);
  writeFileSync(join(dir, 'wrong.ts'), WRONG);
  const tsc = await run(process.execPath, [
    join(ROOT, 'node_modules/typescript/bin/tsc'),
    '--noEmit',
    '--strict',
    '--skipLibCheck',
    '--target', 'es2022',
    '--module', 'nodenext',
    '--moduleResolution', 'nodenext',
    '--allowImportingTsExtensions',
    join(dir, 'program.ts'),
    join(dir, 'wrong.ts'),
  ], 120_000);
  const errors = tsc.out.split('\n').filter((l) => /error TS\d+/.test(l));
  t.same(errors.filter((l) => !l.includes('wrong.ts')), [], 'the program type-checks');
  const lines = [...new Set(errors.filter((l) => l.includes('wrong.ts')).map((l) => Number(/wrong\.ts\((\d+),/.exec(l)?.[1])))].sort((x, y) => x - y);
  t.same(lines, [3, 4, 5, 6, 7], 'each wrong line is refused: ' + errors.join('\n'));
});
