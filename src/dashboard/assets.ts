/**
 * The dashboard's files: the single page (dashboard/index.html) and one bundle of its code and
 * one of its styles, built from dashboard/src with esbuild in memory the first time they are
 * asked for (about a tenth of a second), so a fresh clone needs no build step and an instance
 * that never serves the dashboard never loads esbuild. `npm run build:dashboard` builds the
 * same files and prints their gzipped size.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { createHash } from 'node:crypto';

const ROOT = fileURLToPath(new URL('../../dashboard/', import.meta.url));

export interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

export interface Assets {
  'index.html': Asset;
  'app.js': Asset;
  'app.css': Asset;
}

function asset(body: Buffer | string, type: string): Asset {
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body);
  return { body: buf, type, etag: `"${createHash('sha256').update(buf).digest('base64url').slice(0, 22)}"` };
}

export async function buildAssets(): Promise<Assets> {
  const { build } = await import('esbuild');
  const r = await build({
    entryPoints: { app: `${ROOT}src/main.tsx` },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2020'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
    write: false,
    outdir: 'out',
  });
  const out = (ext: string) => r.outputFiles.find((f) => f.path.endsWith(ext))?.contents ?? new Uint8Array();
  return {
    'index.html': asset(readFileSync(`${ROOT}index.html`), 'text/html; charset=utf-8'),
    'app.js': asset(Buffer.from(out('.js')), 'text/javascript; charset=utf-8'),
    'app.css': asset(Buffer.from(out('.css')), 'text/css; charset=utf-8'),
  };
}

/** Bytes of each file and in all, plain and gzipped. */
export function sizes(a: Assets): { file: string; bytes: number; gzip: number }[] {
  const rows: { file: string; bytes: number; gzip: number }[] = (Object.keys(a) as (keyof Assets)[]).map((file) => ({ file, bytes: a[file].body.length, gzip: gzipSync(a[file].body).length }));
  rows.push({ file: 'total', bytes: rows.reduce((n, r) => n + r.bytes, 0), gzip: rows.reduce((n, r) => n + r.gzip, 0) });
  return rows;
}
