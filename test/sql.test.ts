/**
 * Runs every pgTAP file under test/sql/ (but _helpers.sql) with psql against its own
 * clone of the template, and reports each pgTAP assertion as a tap assertion.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase } from './helpers/database.ts';

const DIR = fileURLToPath(new URL('./sql', import.meta.url));

function pgtapFiles(dir: string): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((n) => {
      const p = join(dir, n);
      if (statSync(p).isDirectory()) return pgtapFiles(p);
      return n.endsWith('.sql') && !n.startsWith('_') ? [p] : [];
    });
}

function psql(url: string, file: string): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('psql', ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', url, '-f', file], {
      env: { ...process.env, PGOPTIONS: '-c search_path=public,extensions,tests -c client_min_messages=warning' },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out, err }));
  });
}

for (const file of pgtapFiles(DIR)) {
  t.test(relative(DIR, file), async (t) => {
    const db = await createTestDatabase(t);
    const { code, out, err } = await psql(db.url, file);
    let planned = -1;
    let seen = 0;
    for (const raw of out.split('\n')) {
      const line = raw.trim();
      const plan = /^1\.\.(\d+)$/.exec(line);
      if (plan) planned = Number(plan[1]);
      const m = /^(not ok|ok) (\d+)(?: - (.*))?$/.exec(line);
      if (m) {
        seen++;
        t.ok(m[1] === 'ok' || /# TODO/.test(m[3] ?? ''), m[3] ?? `assertion ${m[2]}`, m[1] === 'ok' ? {} : { diag: out });
      }
    }
    t.equal(code, 0, 'psql exits 0', { stderr: err });
    t.ok(planned > 0, 'the file declares a plan');
    t.equal(seen, planned, 'every planned assertion ran');
  });
}
