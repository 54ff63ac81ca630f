/**
 * `plinth init`: lays out an empty application in a folder: migrations/ (graphile-migrate's
 * committed/ and current.sql), functions/, public/, .env.example, .gitignore lines, a first
 * test using `plinth/testing`, and npm scripts. Never overwrites a file that exists.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

const FILES: Record<string, string> = {
  'migrations/committed/.gitkeep': '',
  'migrations/current.sql': `-- Your migration in progress: \`plinth dev\` applies it on every save, \`plinth db commit\` commits it
-- to migrations/committed/. plinth's own schemas (auth, storage, …) are there already: auth.uid() is
-- the signed-in user's id. For example:
--
-- create table public.notes (
--   id bigint generated always as identity primary key,
--   owner uuid not null default auth.uid() references auth.users (id),
--   body text not null
-- );
-- alter table public.notes enable row level security;
-- create policy notes_owner on public.notes using (owner = auth.uid());
-- grant select, insert, update, delete on public.notes to authenticated;
`,
  'functions/.gitkeep': '',
  'public/index.html': `<!doctype html>
<meta charset="utf-8">
<title>plinth app</title>
<p>Served by plinth from public/.</p>
`,
  '.env.example': `# plinth's settings for this app (copy to .env; plinth reads .env in this folder).
# Without DATABASE_URL, plinth runs an embedded PostgreSQL with its data under .plinth/.
# DATABASE_URL=postgres://user:password@127.0.0.1:5432/app
# Without JWT_SECRET (development), a secret is generated under .plinth/; in production set one
# of at least 32 characters.
# JWT_SECRET=
# PORT=3000
`,
  'test/app.test.js': `// A first test on a real plinth: its own database, cloned from one migrated with
// migrations/ (see plinth's docs/testing.md). Run: npm test
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startPlinth } from 'plinth/testing';

test('a signed-up user reads their own account', async (t) => {
  const p = await startPlinth({ migrations: './migrations', functions: './functions' });
  t.after(() => p.stop());
  const alice = await p.signUp('alice@example.com');
  const res = await fetch(\`\${p.url}/auth/v1/user\`, {
    headers: { apikey: p.anonKey, authorization: \`Bearer \${alice.accessToken}\` },
  });
  assert.equal(res.status, 200);
  assert.equal((await res.json()).email, 'alice@example.com');
});
`,
};

const SCRIPTS: Record<string, string> = {
  start: 'exec plinth start',
  dev: 'exec plinth dev',
  migrate: 'plinth migrate',
  test: 'node --test',
};

const PLINTH = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { allowScripts?: Record<string, boolean> };

const IGNORED = ['.plinth/', '.env', 'node_modules/'];

export function init(dir: string): void {
  const say = (line: string) => process.stdout.write(line + '\n');
  for (const [name, text] of Object.entries(FILES)) {
    const path = join(dir, name);
    if (existsSync(path)) continue;
    mkdirSync(join(path, '..'), { recursive: true });
    writeFileSync(path, text);
    say(`wrote ${name}`);
  }
  const ignore = join(dir, '.gitignore');
  const present = existsSync(ignore) ? readFileSync(ignore, 'utf8').split('\n') : [];
  const missing = IGNORED.filter((l) => !present.includes(l));
  if (missing.length > 0) {
    appendFileSync(ignore, (present.length > 0 && present.at(-1) !== '' ? '\n' : '') + missing.join('\n') + '\n');
    say(`.gitignore: ${missing.join(' ')}`);
  }
  const pkgFile = join(dir, 'package.json');
  type Pkg = { name?: string; private?: boolean; type?: string; scripts?: Record<string, string>; allowScripts?: Record<string, boolean> };
  const pkg: Pkg = existsSync(pkgFile)
    ? (JSON.parse(readFileSync(pkgFile, 'utf8')) as Pkg)
    : { name: basename(dir).toLowerCase().replace(/[^a-z0-9._-]/g, '-'), private: true };
  pkg.type ??= 'module';
  const scripts = (pkg.scripts ??= {});
  const added = Object.entries(SCRIPTS).filter(([k]) => scripts[k] === undefined || /^echo "Error: no test/.test(scripts[k]));
  for (const [k, v] of added) scripts[k] = v;
  // npm asks which dependencies may run install scripts: plinth's need theirs (Node, argon2, Deno, esbuild, PostgreSQL).
  const allow = (pkg.allowScripts ??= {});
  for (const [name, ok] of Object.entries(PLINTH.allowScripts ?? {})) allow[name] ??= ok;
  writeFileSync(pkgFile, JSON.stringify(pkg, null, 2) + '\n');
  if (added.length > 0) say(`package.json scripts: ${added.map(([k]) => k).join(', ')}`);
  say('next: npx plinth dev   (then edit migrations/current.sql; npm test runs test/)');
}
