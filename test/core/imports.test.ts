/**
 * A house with no circle (issue 11): the import graph of `src` rises from `src/core` with
 * no cycle. Walks every `import … from './x.ts'` (type imports included: a cycle of types
 * still ties an area to the boot file) and fails naming the first cycle found. Also: no
 * file in src/core imports an area or the service, and src/host (what only the start and the
 * scripts use) sits on src/core alone, never imported by it.
 */
import t from 'tap';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SRC = join(ROOT, 'src');

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...files(p));
    else if (name.endsWith('.ts')) out.push(p);
  }
  return out;
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

/** Relative imports of one file, resolved to absolute paths. */
export function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(IMPORT)) out.push(resolve(dirname(file), m[1] ?? m[2]));
  return out;
}

export function findCycle(graph: Map<string, string[]>): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (n: string): string[] | null => {
    if (state.get(n) === 'done') return null;
    if (state.get(n) === 'open') return [...stack.slice(stack.indexOf(n)), n];
    state.set(n, 'open');
    stack.push(n);
    for (const m of graph.get(n) ?? []) {
      const c = visit(m);
      if (c) return c;
    }
    stack.pop();
    state.set(n, 'done');
    return null;
  };
  for (const n of graph.keys()) {
    const c = visit(n);
    if (c) return c;
  }
  return null;
}

const graph = new Map(files(SRC).map((f) => [f, importsOf(f)]));

t.test('the walker finds a cycle when there is one', async (t) => {
  const g = new Map([
    ['a', ['b']],
    ['b', ['c']],
    ['c', ['a']],
    ['d', ['a']],
  ]);
  t.same(findCycle(g), ['a', 'b', 'c', 'a']);
  t.equal(findCycle(new Map([['a', ['b']], ['b', []]])), null);
  t.ok(graph.size > 20, `read ${graph.size} files under src`);
  const service = join(SRC, 'service.ts');
  t.ok(graph.get(service)!.some((f) => f.endsWith('core/area.ts')), 'sees the imports (service.ts → core/area.ts)');
});

t.test('no import cycle in src', async (t) => {
  const cycle = findCycle(graph);
  t.equal(cycle && cycle.map((f) => relative(ROOT, f)).join(' → '), null, 'no cycle');
});

t.test('src/core imports nothing above it', async (t) => {
  for (const [file, deps] of graph) {
    if (!file.startsWith(join(SRC, 'core') + '/')) continue;
    const up = deps.filter((d) => !d.startsWith(join(SRC, 'core') + '/'));
    t.same(up.map((d) => relative(ROOT, d)), [], `${relative(ROOT, file)} imports only src/core`);
  }
});

t.test('src/host imports only src/core and itself, and src/core never imports src/host', async (t) => {
  const host = join(SRC, 'host') + '/';
  const core = join(SRC, 'core') + '/';
  let seen = 0;
  for (const [file, deps] of graph) {
    if (!file.startsWith(host)) continue;
    seen++;
    const up = deps.filter((d) => !d.startsWith(core) && !d.startsWith(host));
    t.same(up.map((d) => relative(ROOT, d)), [], `${relative(ROOT, file)} imports only src/core and src/host`);
  }
  t.ok(seen > 5, `read ${seen} files under src/host`);
  const coreToHost = [...graph].filter(([f]) => f.startsWith(core)).flatMap(([f, deps]) => deps.filter((d) => d.startsWith(host)).map((d) => `${relative(ROOT, f)} → ${relative(ROOT, d)}`));
  t.same(coreToHost, [], 'no file in src/core imports src/host');
});
