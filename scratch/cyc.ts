import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve, relative } from 'node:path';
const IMPORT = /(?:^|\n)\s*(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;
function files(dir: string): string[] { const out: string[] = []; for (const n of readdirSync(dir)) { const p = join(dir, n); if (statSync(p).isDirectory()) out.push(...files(p)); else if (n.endsWith('.ts')) out.push(p); } return out; }
for (const f of files('/work/wt/reqpath/src')) { const t = readFileSync(f, 'utf8'); console.log(relative('/work/wt/reqpath/src', f), '->', [...t.matchAll(IMPORT)].map((m) => relative('/work/wt/reqpath/src', resolve(dirname(f), m[1] ?? m[2]))).join(', ')); }
