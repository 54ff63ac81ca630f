/**
 * docs/getting-started.md works as written: every block of it runs, in order, against a real
 * plinth (test/helpers/app.ts, with the job worker and the bundled Deno runtime), and every
 * output it shows is what the service answered. The conventions a block's info string
 * follows (what runs, what is output, what is skipped) are in test/docs/snippets.ts.
 *
 * The shell blocks are run with the real curl and jq, as a reader runs them.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startApp } from '../helpers/app.ts';
import { runDocument } from './snippets.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

t.test('docs/getting-started.md, every block', async (t) => {
  for (const tool of ['curl', 'jq']) {
    const found = spawnSync('bash', ['-c', `command -v ${tool}`]).status === 0;
    // A missing tool is a failure, not a skip: the page tells readers to use it.
    if (!found) throw new Error(`${tool} is not installed: the getting-started page uses it, so this test needs it`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'plinth-getting-started-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const app = await startApp(t, { env: { FUNCTIONS_DIR: join(dir, 'functions') } });
  const markdown = readFileSync(join(ROOT, 'docs/getting-started.md'), 'utf8');
  const n = await runDocument(t, markdown, { app, dir, name: 'docs/getting-started.md' });
  t.ok(n >= 20, `the page's blocks were run or checked (${n})`);
});
