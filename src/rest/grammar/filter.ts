/** Column filters: `{column}=[not.]op.value`, operators and their values. (The whole grammar: ../grammar.ts.) */
import { type Value, type JsonStep, type BinaryOp, type FtsOp, type IsValue, type InFilter, type FilterNode } from './ast.ts';
import { C_DQUOTE, C_LPAREN, C_RPAREN, C_COMMA, C_DOT, C_0, C_9, C_A, C_Z, C_LBRACKET, C_RBRACKET, C_UNDERSCORE, C_LBRACE, C_RBRACE, invalid, isLower, skipWs, sliceTrim, readQuoted, splitFilterKey, readWord, endOfList, type Cursor } from './scan.ts';

// Operator classes (internal).
export const K_CMP = 1; // eq neq gt gte lt lte
export const K_LIKE = 2; // like ilike
export const K_ARRAY = 3; // cs cd ov
export const K_RANGE = 4; // sl sr nxl nxr adj
export const K_IS = 5;
export const K_IN = 6;
export const K_FTS = 7;

export function opClass(op: string): number {
  switch (op) {
    case 'eq':
    case 'neq':
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
      return K_CMP;
    case 'like':
    case 'ilike':
      return K_LIKE;
    case 'cs':
    case 'cd':
    case 'ov':
      return K_ARRAY;
    case 'sl':
    case 'sr':
    case 'nxl':
    case 'nxr':
    case 'adj':
      return K_RANGE;
    case 'is':
      return K_IS;
    case 'in':
      return K_IN;
    case 'fts':
    case 'plfts':
    case 'phfts':
    case 'wfts':
      return K_FTS;
    default:
      return 0;
  }
}

/** Result of scanning `[not.]op[(lang)].` — kept in a reusable scratch object. */
export interface OpHead {
  negated: boolean;
  op: string;
  kind: number;
  lang: string | null;
  quant: 'any' | 'all' | null;
}

/** Scans `[not.]op[(lang)].` at c.i; leaves c.i at the first char of the value. */
export function readOpHead(c: Cursor, head: OpHead): void {
  const s = c.s;
  let word = readWord(c);
  head.negated = false;
  if (word === 'not' && s.charCodeAt(c.i) === C_DOT) {
    head.negated = true;
    c.i++;
    word = readWord(c);
  }
  const kind = opClass(word);
  if (kind === 0) throw invalid();
  head.op = word;
  head.kind = kind;
  head.lang = null;
  head.quant = null;
  if ((kind === K_CMP || kind === K_LIKE) && s.charCodeAt(c.i) === C_LPAREN) {
    // `op(any)` / `op(all)`
    c.i++;
    const q = readWord(c);
    if ((q !== 'any' && q !== 'all') || s.charCodeAt(c.i) !== C_RPAREN) throw invalid();
    head.quant = q;
    c.i++;
  }
  if (kind === K_FTS && s.charCodeAt(c.i) === C_LPAREN) {
    const start = ++c.i;
    let i = start;
    for (;;) {
      const ch = s.charCodeAt(i);
      if (isLower(ch) || (ch >= C_A && ch <= C_Z) || (ch >= C_0 && ch <= C_9) || ch === C_UNDERSCORE) i++;
      else break;
    }
    if (i === start || s.charCodeAt(i) !== C_RPAREN) throw invalid();
    head.lang = s.slice(start, i);
    c.i = i + 1;
  }
  if (s.charCodeAt(c.i) !== C_DOT) throw invalid();
  c.i++;
}

/** Parses an `in` list at c.i (which must be at '('); leaves c.i after the ')'. */
export function readList(c: Cursor): string[] {
  const s = c.s;
  if (s.charCodeAt(c.i) !== C_LPAREN) throw invalid();
  c.i++;
  const items: string[] = [];
  skipWs(c);
  if (s.charCodeAt(c.i) === C_RPAREN) {
    c.i++;
    return items;
  }
  for (;;) {
    skipWs(c);
    if (s.charCodeAt(c.i) === C_DQUOTE) {
      items.push(readQuoted(c));
      skipWs(c);
    } else {
      const start = c.i;
      let i = start;
      while (i < s.length) {
        const ch = s.charCodeAt(i);
        if (ch === C_COMMA || ch === C_RPAREN) break;
        i++;
      }
      items.push(sliceTrim(s, start, i));
      c.i = i;
    }
    // End of input inside the list, or junk after a quoted element, is invalid.
    if (endOfList(c)) return items;
  }
}

export function isRangeLiteral(v: string): boolean {
  const n = v.length;
  if (n < 2) return false;
  const a = v.charCodeAt(0);
  const b = v.charCodeAt(n - 1);
  return (a === C_LBRACKET || a === C_LPAREN) && (b === C_RBRACKET || b === C_RPAREN);
}
export function isArrayLiteral(v: string): boolean {
  const n = v.length;
  return n >= 2 && v.charCodeAt(0) === C_LBRACE && v.charCodeAt(n - 1) === C_RBRACE;
}

export function isValueOf(v: string): IsValue {
  switch (v.length <= 7 ? v.toLowerCase() : '') {
    case 'null':
      return 'null';
    case 'true':
      return 'true';
    case 'false':
      return 'false';
    case 'unknown':
      return 'unknown';
    default:
      throw invalid();
  }
}

/** Builds the node for a scalar-valued operator (everything but `in`), pushing its value(s). */
export function makeFilter(column: string, head: OpHead, value: string, values: Value[], path: JsonStep[] | null = null): FilterNode {
  const negated = head.negated;
  let node: FilterNode;
  switch (head.kind) {
    case K_IS:
      node = { kind: 'filter', column, negated, op: 'is', value: isValueOf(value) };
      return path === null ? node : { ...node, path };
    case K_FTS: {
      const slot = values.push(value) - 1;
      const langSlot = head.lang === null ? null : values.push(head.lang) - 1;
      node = { kind: 'filter', column, negated, op: head.op as FtsOp, slot, langSlot };
      return path === null ? node : { ...node, path };
    }
    case K_LIKE:
      if (value.indexOf('*') >= 0) value = value.replaceAll('*', '%');
      break;
    case K_ARRAY:
      if (!isArrayLiteral(value) && !isRangeLiteral(value)) throw invalid();
      break;
    case K_RANGE:
      if (!isRangeLiteral(value)) throw invalid();
      break;
  }
  if (head.quant !== null && !isArrayLiteral(value)) throw invalid();
  const bin: { kind: 'filter'; column: string; negated: boolean; op: BinaryOp; slot: number; quant?: 'any' | 'all'; path?: JsonStep[] } = {
    kind: 'filter',
    column,
    negated,
    op: head.op as BinaryOp,
    slot: values.push(value) - 1,
  };
  if (head.quant !== null) bin.quant = head.quant;
  if (path !== null) bin.path = path;
  return bin;
}

/**
 * Parses one column filter `{column}={raw}`, raw = `[not.]op.value`. The value is
 * everything after `op.`, verbatim (top-level values are not unquoted; `in` lists are).
 * Value(s) are pushed onto `values`; pass the query's array.
 */
export function parseFilter(key: string, raw: string, values: Value[] = []): FilterNode {
  const c: Cursor = { s: raw, i: 0 };
  const head: OpHead = { negated: false, op: '', kind: 0, lang: null, quant: null };
  readOpHead(c, head);
  const { column, path } = splitFilterKey(key, values);
  if (head.kind === K_IN) {
    const list = readList(c);
    skipWs(c);
    if (c.i !== raw.length) throw invalid();
    const node: InFilter = { kind: 'filter', column, negated: head.negated, op: 'in', slot: values.push(list) - 1 };
    return path === null ? node : { ...node, path };
  }
  return makeFilter(column, head, raw.slice(c.i), values, path);
}
