/**
 * The README is a README: a newcomer reads it in five minutes (at most 300 lines), it holds
 * no diary (no dates, no issue numbers), its configuration table names every environment
 * variable src/core/config.ts and its readers (src/core/config/) read, and it leads into docs/.
 */
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** Every variable config.ts reads: `str(env, 'X')`, `bool(env, 'X' …)` …, and the OAuth prefixes' names. */
export function configVariables(source: string): string[] {
  const names = new Set<string>();
  for (const m of source.matchAll(/\b(?:str|bool|int|url)\(env, '([A-Z][A-Z0-9_]*)'/g)) names.add(m[1]);
  const prefixed = [...source.matchAll(/\(env, `\$\{prefix\}_([A-Z_]+)`/g)].map((m) => m[1]);
  const prefixes = [...source.matchAll(/\['[a-z]+', '([A-Z]+)'\]/g)].map((m) => m[1]);
  for (const p of prefixes) for (const s of prefixed) names.add(`${p}_${s}`);
  return [...names].sort();
}

t.test('short', async (t) => {
  const lines = readme.trimEnd().split('\n').length;
  t.ok(lines <= 300, `README.md has ${lines} lines (at most 300)`);
});

t.test('no diary', async (t) => {
  readme.split('\n').forEach((line, i) => {
    if (/\b20\d\d-\d\d-\d\d\b/.test(line)) t.fail(`README.md:${i + 1} is dated`, { line });
    if (/\bissues?\s+#?\d+|#\d{1,4}\b/i.test(line)) t.fail(`README.md:${i + 1} cites an issue`, { line });
  });
});

t.test('the configuration table names every variable', async (t) => {
  const files = ['src/core/config.ts', ...readdirSync(join(ROOT, 'src/core/config')).map((f) => `src/core/config/${f}`)];
  const source = files.map((f) => readFileSync(join(ROOT, f), 'utf8')).join('\n');
  const names = configVariables(source);
  t.ok(names.length > 60, `config.ts and config/ read ${names.length} variables`);
  t.ok(names.includes('GITHUB_USERINFO_URL') && names.includes('S3_BUCKET'), 'prefixed and plain names are both found');
  const section = readme.slice(readme.indexOf('\n## Configuration\n'), readme.indexOf('\n## ', readme.indexOf('\n## Configuration\n') + 1));
  const table = section.split('\n').filter((l) => l.startsWith('|'));
  t.ok(table.length > 30, 'the section holds one table');
  const text = table.join('\n');
  for (const name of names) {
    // `GITHUB_…` rows stand for a provider's variables named in full on the google row.
    const family = /^(GITHUB|MICROSOFT)_/.test(name) && text.includes(`\`${name.split('_')[0]}_…\``) && text.includes(`GOOGLE_${name.slice(name.indexOf('_') + 1)}`);
    t.ok(text.includes(`\`${name}\``) || family, `${name} is in the table`);
  }
});

t.test('it leads into docs/', async (t) => {
  for (const page of ['docs/getting-started.md', 'docs/api/overview.md', 'docs/client.md', 'docs/operations.md', 'docs/security.md']) {
    t.ok(readme.includes(`](${page})`), `links ${page}`);
  }
});
