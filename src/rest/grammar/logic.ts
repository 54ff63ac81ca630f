/** The `or` / `and` groups: nested terms of filters and groups. (The whole grammar: ../grammar.ts.) */
import { MAX_LOGIC_DEPTH, type Value, type InFilter, type FilterNode, type LogicNode } from './ast.ts';
import { C_DQUOTE, C_LPAREN, C_RPAREN, C_COMMA, C_DOT, C_LBRACKET, C_RBRACKET, C_LBRACE, C_RBRACE, invalid, skipWs, sliceTrim, readQuoted, readName, readPath, readWord, endOfList, type Cursor } from './scan.ts';
import { K_ARRAY, K_RANGE, K_IN, readOpHead, readList, makeFilter, type OpHead } from './filter.ts';

/**
 * Parses an `or=(…)` / `and=(…)` parameter value (`negated` for `not.or` / `not.and`).
 * Value(s) are pushed onto `values`; pass the query's array.
 */
export function parseLogic(
  kind: 'or' | 'and',
  raw: string,
  negated: boolean = false,
  values: Value[] = [],
): LogicNode {
  const c: Cursor = { s: raw, i: 0 };
  const head: OpHead = { negated: false, op: '', kind: 0, lang: null, quant: null };
  skipWs(c);
  if (raw.charCodeAt(c.i) !== C_LPAREN) throw invalid();
  c.i++;
  const node = parseGroup(c, kind, negated, 1, head, values);
  skipWs(c);
  if (c.i !== raw.length) throw invalid();
  return node;
}

/** c.i is just after the group's '('; leaves c.i after its ')'. */
export function parseGroup(
  c: Cursor,
  op: 'and' | 'or',
  negated: boolean,
  depth: number,
  head: OpHead,
  values: Value[],
): LogicNode {
  if (depth > MAX_LOGIC_DEPTH) throw invalid();
  const children: (FilterNode | LogicNode)[] = [];
  for (;;) {
    skipWs(c);
    children.push(parseTerm(c, depth, head, values));
    skipWs(c);
    if (endOfList(c)) return { kind: 'logic', op, negated, children };
  }
}

/** If `and(` / `or(` starts at c.i (whitespace before '(' allowed), consumes through '(' and returns the op. */
export function tryGroupOpen(c: Cursor): 'and' | 'or' | null {
  const s = c.s;
  const save = c.i;
  const w = readWord(c);
  if (w === 'and' || w === 'or') {
    skipWs(c);
    if (s.charCodeAt(c.i) === C_LPAREN) {
      c.i++;
      return w;
    }
  }
  c.i = save;
  return null;
}

export function parseTerm(c: Cursor, depth: number, head: OpHead, values: Value[]): FilterNode | LogicNode {
  const s = c.s;
  // Nested group: [not.](and|or)(…). A column may still be called `not`, `and` or `or`.
  const start = c.i;
  let negated = false;
  if (s.startsWith('not.', start)) {
    c.i += 4;
    negated = true;
  }
  const g = tryGroupOpen(c);
  if (g !== null) return parseGroup(c, g, negated, depth + 1, head, values);
  c.i = start;

  const column = readName(c);
  if (column === '') throw invalid();
  const path = readPath(c, values, { key: '' });
  if (s.charCodeAt(c.i) !== C_DOT) throw invalid();
  c.i++;
  readOpHead(c, head);
  if (head.kind === K_IN) {
    skipWs(c);
    const list = readList(c);
    const node: InFilter = { kind: 'filter', column, negated: head.negated, op: 'in', slot: values.push(list) - 1 };
    return path === null ? node : { ...node, path };
  }
  return makeFilter(column, head, readGroupValue(c, head.kind), values, path);
}

/**
 * Scans a literal from `i`, passing over quoted strings, to just after the character that
 * `closes` says ends it; returns that index. The end of the input before it is invalid.
 */
export function scanLiteral(c: Cursor, i: number, closes: (ch: number) => boolean): number {
  const s = c.s;
  for (;;) {
    if (i >= s.length) throw invalid();
    const ch = s.charCodeAt(i);
    if (ch === C_DQUOTE) {
      c.i = i;
      readQuoted(c);
      i = c.i;
      continue;
    }
    i++;
    if (closes(ch)) return i;
  }
}

/** Reads a term's value up to (not including) the ',' or ')' that ends the term. */
export function readGroupValue(c: Cursor, kind: number): string {
  const s = c.s;
  skipWs(c);
  const start = c.i;
  const first = s.charCodeAt(start);
  if (first === C_DQUOTE) return readQuoted(c);
  if (first === C_LBRACE) {
    // {…} (array or JSON literal) with nested braces and quoted elements, for any operator.
    let depth = 0;
    c.i = scanLiteral(c, start, (ch) => (ch === C_LBRACE ? (depth++, false) : ch === C_RBRACE && --depth === 0));
    return s.slice(start, c.i);
  }
  if ((kind === K_ARRAY || kind === K_RANGE) && (first === C_LBRACKET || first === C_LPAREN)) {
    // Range literal: up to the first ']' or ')' outside quotes.
    c.i = scanLiteral(c, start + 1, (ch) => ch === C_RBRACKET || ch === C_RPAREN);
    return s.slice(start, c.i);
  }
  let i = start;
  while (i < s.length) {
    const ch = s.charCodeAt(i);
    if (ch === C_COMMA || ch === C_RPAREN) break;
    i++;
  }
  c.i = i;
  return sliceTrim(s, start, i);
}
