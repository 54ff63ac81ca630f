/**
 * The README's Client example works as written: the `todos` table of its "Your own tables"
 * section (its SQL block, as pasted) and then its Client code block, run as a module in a
 * fresh Node process against a real plinth with only the anon key and the address filled in
 * and `@plinth/client` pointing at the bundle.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { bundleCode } from '../../scripts/build-client.ts';
import { startApp } from '../helpers/app.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

t.test('the README example', async (t) => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Client\n'));
  const m = /```js\n([\s\S]*?)```/.exec(section);
  if (!m) throw new Error('no js block in the Client section');
  const example = m[1];
  t.ok(example.trimEnd().split('\n').length <= 10, 'ten lines');

  const tables = readme.slice(readme.indexOf('\n## Your own tables\n'));
  const ddl = /```sql\n([\s\S]*?)```/.exec(tables);
  if (!ddl) throw new Error('no sql block in the "Your own tables" section');

  const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '0' } });
  // Twice: the section says the block can run again unchanged (graphile-migrate watch does).
  await app.db.sql.unsafe(ddl[1]).simple();
  await app.db.sql.unsafe(ddl[1]).simple();
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });

  mkdirSync(join(ROOT, 'node_modules/.cache'), { recursive: true });
  const dir = mkdtempSync(join(ROOT, 'node_modules/.cache/plinth-readme-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'client.mjs'), await bundleCode());
  const code = example
    .replace("'@plinth/client'", JSON.stringify(pathToFileURL(join(dir, 'client.mjs')).href))
    .replace("'http://localhost:8000'", JSON.stringify(app.url))
    .replace(/\bANON_KEY\b/, JSON.stringify(app.anonKey));
  t.not(code, example);
  writeFileSync(join(dir, 'example.mjs'), code);
  const { stdout } = await promisify(execFile)(process.execPath, [join(dir, 'example.mjs')], { cwd: dir, timeout: 60_000 });
  t.match(stdout, /^SIGNED_IN ada@example\.com$/m, 'the auth event');
  t.match(stdout, /title: 'try plinth'/, 'the selected rows');
  t.match(stdout, /status: 200/, 'the batch results');
  const rows = await app.db.sql`select title, done from public.todos order by id`;
  t.same(rows.map((r) => ({ ...r })), [
    { title: 'try plinth', done: false },
    { title: 'and batch', done: true },
  ]);
});
