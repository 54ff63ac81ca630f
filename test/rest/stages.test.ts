/**
 * REST's stages keep to their side of the boundaries (docs/architecture.md): the parse stage
 * knows no catalog, the builder reads the plan tree alone (no catalog, no planner), and the
 * areas outside REST use its public face only (prepare.ts, execute.ts).
 */
import t from 'tap';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const IMPORT = /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?['"](\.{1,2}\/[^'"]+)['"]/g;

/** The files of src/ a file imports (type imports included), relative to src/. */
function importsOf(file: string): string[] {
  const abs = join(ROOT, 'src', file);
  return [...readFileSync(abs, 'utf8').matchAll(IMPORT)].map((m) => relative(join(ROOT, 'src'), resolve(dirname(abs), m[1])));
}

t.test('the builder reads the plan tree alone', async (t) => {
  const allowed = new Set(['rest/plan/tree.ts', 'rest/statement.ts', 'rest/prefer.ts', 'rest/sql/fragments.ts', 'rest/grammar.ts']);
  for (const file of ['rest/sql/build.ts', 'rest/sql/fragments.ts']) {
    const extra = importsOf(file).filter((f) => !allowed.has(f));
    t.same(extra, [], `${file} imports neither the catalog nor the planner`);
  }
});

t.test('the parse stage knows no catalog and no planner', async (t) => {
  for (const f of importsOf('rest/request.ts')) {
    t.notOk(/^rest\/(catalog|plan|prepare|sql\/)/.test(f), `request.ts does not import ${f}`);
  }
});

t.test('the plan tree is types only', async (t) => {
  const text = readFileSync(join(ROOT, 'src/rest/plan/tree.ts'), 'utf8');
  t.notMatch(text, /^import (?!type )/m, 'plan/tree.ts imports types only');
  t.notMatch(text, /^export (function|const|class) /m, 'plan/tree.ts declares no code');
});

t.test('other areas use REST through prepare.ts and execute.ts only', async (t) => {
  const src = join(ROOT, 'src');
  const files = (readdirSync(src, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts') && !f.startsWith('rest/'));
  const used = new Set<string>();
  // `plinth gen types` (src/cli/gen-types.ts) reads the catalog itself: it describes what REST exposes.
  for (const f of files) for (const i of importsOf(f)) if (i.startsWith('rest/') && !f.startsWith('service.ts') && f !== 'cli/gen-types.ts') used.add(i);
  t.same([...used].sort(), ['rest/execute.ts', 'rest/prepare.ts']);
});
