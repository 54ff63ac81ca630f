/**
 * The client as a package an application installs: `npm pack ./packages/client` after
 * `npm run build:client`, installed into an application folder outside the checkout, where
 * `import … from '@plinth/client'` runs under Node and type-checks (its declarations'
 * one dependency, @supabase/postgrest-js's types, comes with it).
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildClient } from '../../scripts/build-client.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const npm = (args: string[], cwd: string) =>
  execFileSync('npm', [...args, '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });

t.test('npm pack, npm install, import and type-check in an application', { timeout: 170_000 }, async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'plinth-client-pkg-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const pkg = join(work, 'client');
  mkdirSync(pkg);
  cpSync(join(ROOT, 'packages/client/package.json'), join(pkg, 'package.json'));
  cpSync(join(ROOT, 'packages/client/README.md'), join(pkg, 'README.md'));
  await buildClient({ quiet: true, outDir: join(pkg, 'dist') });
  npm(['pack', '--pack-destination', work], pkg);
  const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
  t.match(tarball, /^plinth-client-\d+\.\d+\.\d+\.tgz$/, 'a tarball');

  const app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'my-app', private: true, type: 'module' }));
  npm(['install', join(work, tarball!)], app);

  writeFileSync(
    join(app, 'main.ts'),
    `import { createClient, ref, type Session } from '@plinth/client';
const plinth = createClient('http://localhost:8000', 'anon');
const s: Session | null = null;
const q = plinth.from('todos').select('id, title').eq('done', false);
console.log(JSON.stringify({ client: typeof plinth.from, ref: ref('a', 'id'), s, q: typeof q.then }));
`,
  );
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { noEmit: true, strict: true, target: 'es2022', module: 'esnext', moduleResolution: 'bundler', lib: ['es2022', 'dom'], types: [], skipLibCheck: false }, files: ['main.ts'] }),
  );
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  let typeErrors = '';
  try {
    execFileSync(process.execPath, [tsc, '-p', app], { encoding: 'utf8' });
  } catch (err) {
    typeErrors = String((err as { stdout?: string }).stdout ?? err);
  }
  t.equal(typeErrors, '', 'the application type-checks against the installed package');
  const out = execFileSync(process.execPath, [join(app, 'main.ts')], { cwd: app, encoding: 'utf8' });
  t.same(JSON.parse(out), { client: 'function', ref: '{{a.id}}', s: null, q: 'function' }, 'and runs under Node');
});
