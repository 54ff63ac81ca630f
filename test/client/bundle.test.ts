/**
 * `npm run build:client` (issue 16): one ES module for browsers with its declarations,
 * within the size goal (≤ 25 kB minified and gzipped, @supabase/postgrest-js included),
 * free of Node-only imports, and typed for an application that has only the DOM library.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildClient } from '../../scripts/build-client.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

t.test('the bundle and its declarations', async (t) => {
  // Under node_modules/.cache so that the declarations find @supabase/postgrest-js.
  mkdirSync(join(ROOT, 'node_modules/.cache'), { recursive: true });
  const out = mkdtempSync(join(ROOT, 'node_modules/.cache/plinth-client-build-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const r = await buildClient({ quiet: true, outDir: join(out, 'dist') });
  // Files under node_modules get no ES-module syntax detection: say what the bundle is.
  writeFileSync(join(out, 'package.json'), '{"type": "module"}\n');
  t.ok(r.gzip <= 25 * 1024, `${(r.gzip / 1024).toFixed(1)} kB minified+gzipped ≤ 25 kB`);
  const code = readFileSync(r.file, 'utf8');
  t.notMatch(code, /from\s*["']node:|require\(["']node:|from\s*["'](fs|path|crypto|http|net|os)["']/, 'no Node-only imports');
  t.notMatch(code, /\bimport\s*[^(]*from\s*["'][^"'./]/, 'self-contained: no bare imports left');
  t.match(code, /export\s*\{/, 'an ES module');
  t.ok(existsSync(join(out, 'dist/client.d.ts')));
  t.notMatch(readFileSync(join(out, 'dist/types/client/auth.d.ts'), 'utf8'), /\.ts'/, 'declarations name .js modules');

  // The module loads and works without a browser too (Node has fetch and WebSocket).
  const mod = await import(r.file);
  t.type(mod.createClient, 'function');
  t.equal(mod.ref('a', 'id'), '{{a.id}}');

  // An application with only the DOM library type-checks against the declarations.
  const app = join(out, 'app.ts');
  writeFileSync(
    app,
    `import { createClient, ref, type Session } from './dist/client.js';
const plinth = createClient('http://localhost:8000', 'anon');
const { data, error } = await plinth.from('todos').select('id, title').eq('done', false);
const s: Session | null = (await plinth.auth.getSession()).data?.session ?? null;
plinth.auth.onAuthStateChange((event, session) => console.log(event, session?.user?.email));
const up = await plinth.storage.from('files').upload('a.txt', new Blob(['x']), { upsert: true });
const fn = await plinth.functions.invoke<{ ok: boolean }>('hello', { body: { a: 1 } });
const q = plinth.live('todos', { refetch: () => plinth.from('todos').select() });
q.on('change', (rows) => console.log(rows.length));
const b = await plinth.batch([{ id: 'o', method: 'POST', path: 'orders', body: {} }, { method: 'GET', path: 'items', query: { order_id: 'eq.' + ref('o', 'id') } }]);
console.log(data, error, s, up.data?.key, fn.data?.ok, b.data?.results);
`,
  );
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  let outText = '';
  try {
    writeFileSync(
      join(out, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { noEmit: true, strict: true, target: 'es2022', module: 'esnext', moduleResolution: 'bundler', lib: ['es2022', 'dom', 'dom.iterable'], types: [], skipLibCheck: false },
        files: ['app.ts'],
      }),
    );
    execFileSync(process.execPath, [tsc, '-p', join(out, 'tsconfig.json')], { encoding: 'utf8', cwd: out });
  } catch (e) {
    outText = String((e as { stdout?: string }).stdout ?? e);
  }
  t.equal(outText, '', 'the declarations type-check with lib dom and no Node types');
});
