/**
 * Runs the fenced code blocks of a Markdown document, in order, against a real plinth, so
 * that a document that says "paste this" stays true.
 *
 * A block's info string is its language, then words of this harness (rendered Markdown shows
 * neither, so they cost the reader nothing):
 *
 *   ```sql                  run as the database owner, as one simple-protocol query (or by
 *                           RunOptions.sql: the way the document tells its reader to)
 *   ```sh                   run by bash (`set -eo pipefail`) in a scratch folder; what it
 *                           `export`s carries over to the later sh and js blocks
 *   ```js                   run as an ES module by Node in the scratch folder, with the
 *                           exported variables in `process.env`
 *   ```js background name=N started like a js block and left running to the end of the
 *                           test (a server); the test goes on once it printed its first line
 *   ```ts file=P            written to P under the scratch folder (any language), not run
 *   ```json output          what the previous sh or js block printed (`of=N`: what the
 *                           background block N printed so far). Output that parses as JSON
 *                           is compared as JSON: a value "…" matches anything, an entry
 *                           "…": "…" allows more keys, a last element "…" more elements.
 *                           Other output is compared line by line: each line of the block,
 *                           with "…" matching any text, must appear in the output, in order
 *   ```json output retry    the same, for output that may take a moment (a delivery, a
 *                           catalog reload): the block is run again (a background block's
 *                           output read again) until it matches, 30 s at most
 *   ```sh skip              what the test does itself: starting plinth (it starts one with
 *                           test/helpers/app.ts) and exporting the keys it printed
 *
 * Any other block fails the test: every block of the document is run, checked or written.
 * Before running, `http://localhost:8000` (and `ws://…`) becomes the service's address,
 * `localhost:9000` and the port 9000 a free port (for a receiver the document runs), and
 * `'@plinth/client'` the client bundle. `ANON_KEY` and `SERVICE_ROLE_KEY` are exported.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Test } from 'tap';
import { bundleCode } from '../../scripts/build-client.ts';
import type { TestApp } from '../helpers/app.ts';
import { freePort } from '../helpers/ports.ts';

export interface Block {
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  words: Set<string>;
  attrs: Map<string, string>;
  text: string;
}

/** The fenced blocks of a Markdown text (``` fences, not nested). */
export function fencedBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(.*)$/.exec(lines[i]);
    if (!open) continue;
    const [lang = '', ...rest] = open[1].trim().split(/\s+/);
    const words = new Set<string>();
    const attrs = new Map<string, string>();
    for (const w of rest) {
      const eq = w.indexOf('=');
      if (eq > 0) attrs.set(w.slice(0, eq), w.slice(eq + 1));
      else if (w !== '') words.add(w);
    }
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length && !/^```\s*$/.test(lines[j]); j++) body.push(lines[j]);
    if (j === lines.length) throw new Error(`unclosed fence at line ${i + 1}`);
    out.push({ line: i + 1, lang, words, attrs, text: body.join('\n') + '\n' });
    i = j;
  }
  return out;
}

/** The fenced blocks of `lang` in the section of `heading` (a whole heading line: up to the next heading of its level or above). */
export function blocksUnder(markdown: string, heading: string, lang: string): Block[] {
  const lines = markdown.split('\n');
  const at = lines.indexOf(heading);
  if (at < 0) throw new Error(`no heading ${heading}`);
  const level = /^#+/.exec(heading)![0].length;
  let end = lines.findIndex((l, i) => i > at && new RegExp(`^#{1,${level}} `).test(l));
  if (end < 0) end = lines.length;
  return fencedBlocks(markdown).filter((b) => b.line > at + 1 && b.line <= end && b.lang === lang);
}

const WILD = '…';

/** Does `actual` match `expected`, where "…" matches any value (see the header)? */
export function jsonMatches(expected: unknown, actual: unknown): boolean {
  if (expected === WILD) return true;
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return false;
    const open = expected.length > 0 && expected[expected.length - 1] === WILD;
    const items = open ? expected.slice(0, -1) : expected;
    if (open ? actual.length < items.length : actual.length !== items.length) return false;
    return items.every((e, i) => jsonMatches(e, actual[i]));
  }
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
    const e = expected as Record<string, unknown>;
    const a = actual as Record<string, unknown>;
    const open = e[WILD] === WILD;
    const keys = Object.keys(e).filter((k) => !(open && k === WILD));
    if (!keys.every((k) => Object.hasOwn(a, k) && jsonMatches(e[k], a[k]))) return false;
    return open || Object.keys(a).length === keys.length;
  }
  return expected === actual;
}

/** Each non-empty line of `expected` ("…" = any text) appears in `actual`, in order. */
export function textMatches(expected: string, actual: string): boolean {
  const want = expected.split('\n').map((l) => l.trim()).filter(Boolean);
  const got = actual.split('\n').map((l) => l.trim());
  let at = 0;
  for (const w of want) {
    const re = new RegExp('^' + w.split(WILD).map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$');
    while (at < got.length && !re.test(got[at])) at++;
    if (at === got.length) return false;
    at++;
  }
  return true;
}

/** Output matches the expectation of an output block: as JSON when the block is JSON. */
export function outputMatches(expected: string, actual: string): boolean {
  let want: unknown;
  try {
    want = JSON.parse(expected);
  } catch {
    return textMatches(expected, actual);
  }
  try {
    return jsonMatches(want, JSON.parse(actual));
  } catch {
    return false;
  }
}

interface Ran {
  stdout: string;
  stderr: string;
  code: number | null;
}

function run(command: string, args: string[], cwd: string, timeoutMs: number): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code });
    });
  });
}

export interface RunOptions {
  app: TestApp;
  /** The scratch folder: sh and js blocks run here, file blocks are written here. */
  dir: string;
  /** The document's name, for messages. */
  name: string;
  /** Runs a sql block (default: the test database's owner connection, simple protocol). */
  sql?: (text: string) => Promise<void>;
}

const RETRY_MS = 30_000;

/** The first call answers what the block printed when it ran; later calls run it again. */
function rerun(first: string, again: () => Promise<string>): () => Promise<string> {
  let used = false;
  return async () => {
    if (used) return again();
    used = true;
    return first;
  };
}
const BLOCK_TIMEOUT_MS = 90_000;

/** Run every block of `markdown` (see the header); returns how many blocks ran or were checked. */
export async function runDocument(t: Test, markdown: string, o: RunOptions): Promise<number> {
  const { app, dir } = o;
  const service = new URL(app.url);
  const receiverPort = await freePort();
  mkdirSync(dir, { recursive: true });
  const state = join(dir, '.exported.sh');
  writeFileSync(state, `export ANON_KEY='${app.anonKey}'\nexport SERVICE_ROLE_KEY='${app.serviceKey}'\n`);
  const clientFile = join(dir, '.plinth-client.mjs');
  writeFileSync(clientFile, await bundleCode());

  const substitute = (text: string): string =>
    text
      .replaceAll('localhost:8000', service.host)
      .replaceAll('localhost:9000', `127.0.0.1:${receiverPort}`)
      .replace(/\b9000\b/g, String(receiverPort))
      .replaceAll("'@plinth/client'", JSON.stringify(pathToFileURL(clientFile).href));

  const background = new Map<string, { child: ChildProcess; stdout: () => string }>();
  t.teardown(() => {
    for (const { child } of background.values()) child.kill('SIGTERM');
  });

  let n = 0;
  let last: { block: Block; again: () => Promise<string> } | null = null;

  const runSh = async (b: Block, i: number): Promise<string> => {
    const file = join(dir, `.block-${i}.sh`);
    writeFileSync(file, `set -eo pipefail\nsource '${state}'\n${substitute(b.text)}\nexport -p > '${state}'\n`);
    const r = await run('bash', [file], dir, BLOCK_TIMEOUT_MS);
    if (r.code !== 0) throw new Error(`sh block at line ${b.line} exited ${r.code}\n${r.stderr}${r.stdout}`);
    return r.stdout;
  };

  const jsCommand = (b: Block, i: number): string => {
    const file = join(dir, `.block-${i}.mjs`);
    writeFileSync(file, substitute(b.text));
    return `source '${state}'; exec '${process.execPath}' '${file}'`;
  };

  const runJs = async (b: Block, i: number): Promise<string> => {
    const r = await run('bash', ['-c', jsCommand(b, i)], dir, BLOCK_TIMEOUT_MS);
    if (r.code !== 0) throw new Error(`js block at line ${b.line} exited ${r.code}\n${r.stderr}${r.stdout}`);
    return r.stdout;
  };

  const blocks = fencedBlocks(markdown);
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i];
    const where = `${o.name}:${b.line}`;
    if (b.words.has('skip')) {
      n++;
      continue;
    }
    if (b.attrs.has('file')) {
      const path = join(dir, b.attrs.get('file')!);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, b.text);
      n++;
      continue;
    }
    if (b.words.has('output')) {
      const of = b.attrs.get('of');
      let source: { again: () => Promise<string> } | null;
      if (of !== undefined) {
        const bg = background.get(of);
        source = bg ? { again: async () => bg.stdout() } : null;
      } else source = last;
      if (source === null) {
        t.fail(`${where}: an output block with nothing before it to check`);
        continue;
      }
      let actual = await source.again();
      if (b.words.has('retry')) {
        const until = Date.now() + RETRY_MS;
        while (!outputMatches(b.text, actual) && Date.now() < until) {
          await new Promise((r) => setTimeout(r, 250));
          actual = await source.again();
        }
      }
      t.ok(outputMatches(b.text, actual), `${where}: the output is as shown`, { expected: b.text, actual });
      n++;
      continue;
    }
    switch (b.lang) {
      case 'sql': {
        if (o.sql) await o.sql(b.text);
        else await app.db.sql.unsafe(b.text).simple();
        t.ok(true, `${where}: the SQL runs`);
        break;
      }
      case 'sh': {
        const out = await runSh(b, i);
        t.ok(true, `${where}: the shell block runs`);
        last = { block: b, again: rerun(out, () => runSh(b, i)) };
        break;
      }
      case 'js': {
        if (b.words.has('background')) {
          const name = b.attrs.get('name') ?? `block-${i}`;
          const child = spawn('bash', ['-c', jsCommand(b, i)], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
          let stdout = '';
          let stderr = '';
          child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
          const started = new Promise<void>((resolve, reject) => {
            child.stdout!.on('data', (c: Buffer) => {
              stdout += c.toString();
              resolve();
            });
            child.on('close', (code) => reject(new Error(`background block at line ${b.line} exited ${code}\n${stderr}`)));
          });
          const timer = new Promise<never>((_, reject) =>
            setTimeout(() => reject(new Error(`background block at line ${b.line} printed nothing within 30 s\n${stderr}`)), RETRY_MS).unref(),
          );
          await Promise.race([started, timer]);
          background.set(name, { child, stdout: () => stdout });
          t.ok(true, `${where}: the background block started`);
          break;
        }
        const out = await runJs(b, i);
        t.ok(true, `${where}: the js block runs`);
        last = { block: b, again: rerun(out, () => runJs(b, i)) };
        break;
      }
      default:
        t.fail(`${where}: a \`\`\`${b.lang} block without a convention of test/docs/snippets.ts (run it, check it, write it, or skip it)`);
        continue;
    }
    n++;
  }
  return n;
}
