/** `order`, `limit` and `offset`. (The whole grammar: ../grammar.ts.) */
import { type Value, type OrderTerm } from './ast.ts';
import { C_COMMA, C_DOT, C_0, C_9, invalid, skipWs, readName, readPath, readWord, type Cursor } from './scan.ts';

/** Parses `order`: `col[.asc|.desc][.nullsfirst|.nullslast]`, comma-separated. Blank → []. */
export function parseOrder(raw: string, values: Value[] = []): OrderTerm[] {
  const c: Cursor = { s: raw, i: 0 };
  const terms: OrderTerm[] = [];
  skipWs(c);
  if (c.i === raw.length) return terms;
  for (;;) {
    skipWs(c);
    const column = readName(c);
    if (column === '') throw invalid();
    const path = readPath(c, values, { key: '' });
    let direction: 'asc' | 'desc' = 'asc';
    let nulls: 'first' | 'last' | null = null;
    let seenDir = false;
    while (raw.charCodeAt(c.i) === C_DOT) {
      c.i++;
      const w = readWord(c);
      if (!seenDir && nulls === null && (w === 'asc' || w === 'desc')) {
        direction = w;
        seenDir = true;
      } else if (nulls === null && w === 'nullsfirst') nulls = 'first';
      else if (nulls === null && w === 'nullslast') nulls = 'last';
      else throw invalid();
    }
    terms.push(path === null ? { column, direction, nulls } : { column, path, direction, nulls });
    skipWs(c);
    if (c.i === raw.length) return terms;
    if (raw.charCodeAt(c.i) !== C_COMMA) throw invalid();
    c.i++;
  }
}

/** Parses `limit` / `offset`: a non-negative decimal integer (≤ 2^53 − 1). */
export function parseLimitOffset(raw: string): number {
  const n = raw.length;
  if (n === 0 || n > 16) throw invalid();
  let v = 0;
  for (let i = 0; i < n; i++) {
    const ch = raw.charCodeAt(i);
    if (ch < C_0 || ch > C_9) throw invalid();
    v = v * 10 + (ch - C_0);
  }
  if (!Number.isSafeInteger(v)) throw invalid();
  return v;
}
