/**
 * `npm run build:client`: the client library (src/client) as one ES module for browsers,
 * packages/client/dist/client.js (minified, @supabase/postgrest-js included), with its
 * declarations (dist/client.d.ts over dist/types/), and its size minified and gzipped.
 * packages/client is the package an application installs (`@plinth/client`): from the
 * folder, or from the tarball `npm pack ./packages/client` writes.
 */
import { build, type BuildOptions } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'packages/client/dist');

const ESBUILD_OPTIONS: BuildOptions = {
  entryPoints: [join(ROOT, 'src/client/index.ts')],
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2020'],
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
};

/** The bundle's code, built in memory (what the browser tests serve). */
export async function bundleCode(): Promise<string> {
  const r = await build({ ...ESBUILD_OPTIONS, write: false, outfile: 'client.js' });
  return r.outputFiles[0].text;
}

export async function buildClient(opts: { quiet?: boolean; outDir?: string } = {}): Promise<{ file: string; bytes: number; gzip: number }> {
  const dist = opts.outDir ?? DIST;
  rmSync(dist, { recursive: true, force: true });
  const file = join(dist, 'client.js');
  await build({ ...ESBUILD_OPTIONS, outfile: file, sourcemap: 'linked' });
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.client.json'), '--outDir', join(dist, 'types')], { stdio: 'inherit' });
  // Declarations name the modules as the sources do (`./auth.ts`, `../shared/wire.ts`); consumers resolve `.js`.
  for (const dir of ['client', 'shared']) {
    for (const name of readdirSync(join(dist, 'types', dir))) {
      const p = join(dist, 'types', dir, name);
      writeFileSync(p, readFileSync(p, 'utf8').replace(/(from\s+'\.\.?\/[\w/-]+)\.ts'/g, "$1.js'"));
    }
  }
  writeFileSync(join(dist, 'client.d.ts'), "export * from './types/client/index.js';\n");
  const code = readFileSync(file);
  const gzip = gzipSync(code, { level: 9 }).length;
  if (!opts.quiet) {
    console.log(`packages/client/dist/client.js: ${(code.length / 1024).toFixed(1)} kB minified, ${(gzip / 1024).toFixed(1)} kB minified+gzipped (goal ≤ 25 kB)`);
  }
  return { file, bytes: code.length, gzip };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await buildClient();
