/**
 * docs/getting-started.md works as written: every block of it runs, in order, against a real
 * plinth (test/helpers/app.ts, with the job worker and the bundled Deno runtime), and every
 * output it shows is what the service answered. The conventions a block's info string
 * follows (what runs, what is output, what is skipped) are in test/docs/snippets.ts.
 *
 * As a reader with only Node runs it: plinth in development mode (no JWT_SECRET, as
 * `npm start` on a fresh checkout), no `psql` on the PATH, and each SQL block run where the
 * page says, the dashboard's SQL view (its endpoint, POST /api/sql, with the service-role
 * key, as the view sends it). The shell blocks are run with the real curl and jq.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startApp } from '../helpers/app.ts';
import { runDocument } from './snippets.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** PATH with every folder that holds a `psql` replaced by a folder of links to all it holds but psql. */
function pathWithoutPsql(path: string, shadow: string): string {
  return path
    .split(delimiter)
    .map((dir, i) => {
      if (!dir || !existsSync(join(dir, 'psql'))) return dir;
      const copy = join(shadow, String(i));
      mkdirSync(copy, { recursive: true });
      for (const name of readdirSync(dir)) if (name !== 'psql') symlinkSync(join(dir, name), join(copy, name));
      return copy;
    })
    .join(delimiter);
}

t.test('docs/getting-started.md, every block, with no psql', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-getting-started-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = process.env.PATH;
  process.env.PATH = pathWithoutPsql(path ?? '', join(dir, '.bin'));
  t.teardown(() => {
    process.env.PATH = path;
  });
  t.not(spawnSync('bash', ['-c', 'command -v psql']).status, 0, 'no psql on the PATH');
  for (const tool of ['curl', 'jq']) {
    const found = spawnSync('bash', ['-c', `command -v ${tool}`]).status === 0;
    // A missing tool is a failure, not a skip: the page tells readers to use it.
    if (!found) throw new Error(`${tool} is not installed: the getting-started page uses it, so this test needs it`);
  }
  const app = await startApp(t, { env: { JWT_SECRET: undefined, FUNCTIONS_DIR: join(dir, 'functions') } });
  t.ok(app.config.devMode && app.config.enableSqlEndpoint, 'development mode, where the SQL view is on');
  const markdown = readFileSync(join(ROOT, 'docs/getting-started.md'), 'utf8');
  const sql = async (query: string) => {
    const r = await app.call('POST', '/api/sql', { token: app.serviceKey, body: { query } });
    if (r.status !== 200) throw new Error(`the SQL view's endpoint answered ${r.status}: ${r.text}\n${query}`);
  };
  const n = await runDocument(t, markdown, { app, dir, name: 'docs/getting-started.md', sql });
  t.ok(n >= 20, `the page's blocks were run or checked (${n})`);
});
