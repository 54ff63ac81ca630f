/**
 * Shared set-up of the REST tests: the app on a fresh database with the schema of
 * `schema.sql` (created by the superuser), the catalog refreshed, and tokens.
 */
import { readFileSync } from 'node:fs';
import { SignJWT } from 'jose';
import { startApp, TEST_JWT_SECRET, type StartOptions, type TestApp } from '../helpers/app.ts';

export const SCHEMA_SQL = readFileSync(new URL('./schema.sql', import.meta.url), 'utf8');

interface TapLike {
  teardown(fn: () => unknown): void;
}

/** The app with the REST test schema; `sql` runs as the superuser before the catalog refresh. */
export async function restApp(t: TapLike, opts: StartOptions & { sql?: string } = {}): Promise<TestApp> {
  const app = await startApp(t, { worker: false, ...opts });
  await app.db.sql.unsafe(SCHEMA_SQL).simple();
  if (opts.sql) await app.db.sql.unsafe(opts.sql).simple();
  await refresh(app);
  return app;
}

export async function refresh(app: TestApp): Promise<void> {
  const r = await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  if (r.status !== 200) throw new Error(`catalog refresh: ${r.status} ${r.text}`);
}

/** An access token of a signed-in user (role authenticated), or of a guest. */
export async function userToken(sub: string, opts: { role?: string; extra?: Record<string, unknown> } = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ role: opts.role ?? 'authenticated', aud: 'authenticated', ...opts.extra })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(sub)
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(new TextEncoder().encode(TEST_JWT_SECRET));
}

export const USER_A = '00000000-0000-4000-8000-00000000000a';
export const USER_B = '00000000-0000-4000-8000-00000000000b';

/** Seed rows used by several files. */
export const SEED_SQL = `
insert into public.authors (id, name, born, tags, meta, active, rating, during, mood, nick) values
  (1, 'Ursula Le Guin', '1929-10-21', '{scifi,fantasy}', '{"awards": ["hugo", "nebula"], "prolific": true}', true, 9.5, '[1966,2018)', 'happy', 'ursula'),
  (2, 'Italo Calvino', '1923-10-15', '{fiction}', '{"awards": []}', true, 9.0, '[1947,1985)', 'ok', null),
  (3, 'Anonymous Writer', null, '{}', null, false, null, null, null, null);
select setval(pg_get_serial_sequence('public.authors', 'id'), 100);
insert into public.books (id, author_id, title, pages, published) values
  (1, 1, 'The Left Hand of Darkness', 304, '1969-03-01'),
  (2, 1, 'The Dispossessed', 387, '1974-05-01'),
  (3, 2, 'Invisible Cities', 165, '1972-11-01'),
  (4, null, 'Orphan Book', null, null);
select setval(pg_get_serial_sequence('public.books', 'id'), 100);
insert into public.chapters (id, book_id, title, position) values (1, 1, 'A Parade in Erhenrang', 1), (2, 1, 'The Place Inside the Blizzard', 2), (3, 3, 'Cities and Memory', 1);
select setval(pg_get_serial_sequence('public.chapters', 'id'), 100);
insert into public.paragraphs (id, chapter_id, body) values (1, 1, 'I''ll make my report as if I told a story.'), (2, 1, 'The story is not all mine.');
select setval(pg_get_serial_sequence('public.paragraphs', 'id'), 100);
insert into public.sentences (paragraph_id, words) values (1, 'I''ll make my report');
insert into public.genres (id, name) values (1, 'science fiction'), (2, 'fantasy'), (3, 'poetry');
insert into public.book_genres (book_id, genre_id) values (1, 1), (2, 1), (2, 2), (3, 2);
insert into public.author_profiles (author_id, bio) values (1, 'Wrote Earthsea.');
insert into public.collections (id, parent_id, name) values (1, null, 'root'), (2, 1, 'left'), (3, 1, 'right'), (4, 2, 'leaf');
`;
