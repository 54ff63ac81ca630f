/**
 * `--write-docs`: the run's table of figures written into docs/performance.md, between the
 * markers below (everything else in the page is left as it is). One table, today's run:
 * the history lives in git.
 */
import { readFileSync, writeFileSync } from 'node:fs';

export const DOCS_BEGIN = '<!-- bench:figures (written by npm run bench -- --write-docs) -->';
export const DOCS_END = '<!-- /bench:figures -->';

export interface DocsRow {
  name: string;
  status: string;
  rps: number | null;
  baseline_rps: number | null;
  ratio: number | null;
  p50_ms: number | null;
  p99_ms: number | null;
  rss_mb: number | null;
  target: string;
  baseline: string;
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');

/** The one figure a row is judged by: a ratio, a rate, or MB for a memory goal. */
export function figure(r: DocsRow): string {
  if (r.ratio !== null) return `${r.ratio.toFixed(2)}${r.rps !== null && r.baseline_rps !== null ? ` (${int(r.rps)}/s vs ${int(r.baseline_rps)}/s)` : ''}`;
  if (r.target.endsWith('MB') && r.rss_mb !== null) return `${r.rss_mb} MB`;
  if (r.rps !== null) return `${int(r.rps)}/s${r.p99_ms !== null ? `, p99 ${r.p99_ms.toFixed(1)} ms` : ''}`;
  if (r.p50_ms !== null && r.p99_ms !== null) return `p50 ${r.p50_ms.toFixed(1)} ms, p99 ${r.p99_ms.toFixed(1)} ms`;
  return '—';
}

export function docsTable(rows: readonly DocsRow[], about: string): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  const lines = [about, '', '| scenario | figure | goal | result | baseline |', '|---|---|---|---|---|'];
  for (const r of rows) lines.push(`| \`${r.name}\` | ${cell(figure(r))} | ${cell(r.target)} | ${r.status} | ${cell(r.baseline)} |`);
  return lines.join('\n');
}

/** Replace the section between the markers of `file` with `table`. */
export function writeDocsTable(file: string, table: string): void {
  const page = readFileSync(file, 'utf8');
  const a = page.indexOf(DOCS_BEGIN);
  const b = page.indexOf(DOCS_END);
  if (a < 0 || b < a) throw new Error(`${file} has no ${DOCS_BEGIN} … ${DOCS_END} section`);
  writeFileSync(file, `${page.slice(0, a + DOCS_BEGIN.length)}\n${table}\n${page.slice(b)}`);
}
