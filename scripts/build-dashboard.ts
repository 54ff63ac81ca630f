/**
 * `npm run build:dashboard`: builds the dashboard's files (as the service does in memory on the
 * first request to /_/) and prints their sizes, gzipped included; fails past the 150 kB budget.
 * With `--out DIR` it also writes them there.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildAssets, sizes } from '../src/dashboard/assets.ts';

export const GZIP_BUDGET = 150 * 1024;

const assets = await buildAssets();
const out = process.argv.indexOf('--out');
if (out !== -1 && process.argv[out + 1]) {
  const dir = process.argv[out + 1];
  mkdirSync(dir, { recursive: true });
  for (const name of Object.keys(assets) as (keyof typeof assets)[]) writeFileSync(join(dir, name), assets[name].body);
}
const rows = sizes(assets);
for (const r of rows) process.stdout.write(`${r.file.padEnd(12)} ${String(r.bytes).padStart(8)} B  ${String(r.gzip).padStart(7)} B gzipped\n`);
const total = rows[rows.length - 1].gzip;
process.stdout.write(`dashboard: ${(total / 1024).toFixed(1)} kB gzipped of a ${GZIP_BUDGET / 1024} kB budget\n`);
if (total > GZIP_BUDGET) process.exit(1);
