/** The scanner: a cursor over one parameter, names, quoted names, JSON paths, words. (The whole grammar: ../grammar.ts.) */
import { INVALID_REQUEST, INVALID_EMBED, GrammarError, type Value, type JsonStep } from './ast.ts';

export const C_TAB = 9;
export const C_LF = 10;
export const C_CR = 13;
export const C_SPACE = 32;
export const C_DQUOTE = 34;
export const C_DOLLAR = 36;
export const C_LPAREN = 40;
export const C_RPAREN = 41;
export const C_STAR = 42;
export const C_COMMA = 44;
export const C_MINUS = 45;
export const C_DOT = 46;
export const C_0 = 48;
export const C_9 = 57;
export const C_COLON = 58;
export const C_GT = 62;
export const C_BANG = 33;
export const C_A = 65;
export const C_Z = 90;
export const C_LBRACKET = 91;
export const C_BACKSLASH = 92;
export const C_RBRACKET = 93;
export const C_UNDERSCORE = 95;
export const C_a = 97;
export const C_z = 122;
export const C_LBRACE = 123;
export const C_RBRACE = 125;

export function invalid(): GrammarError {
  return new GrammarError(INVALID_REQUEST);
}
export function invalidEmbed(): GrammarError {
  return new GrammarError(INVALID_EMBED);
}

export function isWs(c: number): boolean {
  return c === C_SPACE || c === C_TAB || c === C_LF || c === C_CR;
}
export function isIdentChar(c: number): boolean {
  return (
    (c >= C_a && c <= C_z) ||
    (c >= C_A && c <= C_Z) ||
    (c >= C_0 && c <= C_9) ||
    c === C_UNDERSCORE ||
    c === C_DOLLAR ||
    c >= 0x80
  );
}
export function isLower(c: number): boolean {
  return c >= C_a && c <= C_z;
}

/** Mutable scan position over one input string. One per parse call. */
export interface Cursor {
  readonly s: string;
  i: number;
  /** SUPABASE_COMPAT=true: `rel(count)` is the count of the related rows (PostgREST). */
  readonly compat?: boolean;
}

export function skipWs(c: Cursor): void {
  const s = c.s;
  let i = c.i;
  while (i < s.length && isWs(s.charCodeAt(i))) i++;
  c.i = i;
}

/** Trims whitespace of s[from, to) and returns the slice. */
export function sliceTrim(s: string, from: number, to: number): string {
  while (from < to && isWs(s.charCodeAt(from))) from++;
  while (to > from && isWs(s.charCodeAt(to - 1))) to--;
  return s.slice(from, to);
}

/** At a `"`: reads a quoted string with `\x` → `x` escapes; leaves c.i after the closing quote. */
export function readQuoted(c: Cursor): string {
  const s = c.s;
  let i = c.i + 1;
  let start = i;
  let out = '';
  for (;;) {
    if (i >= s.length) throw invalid();
    const ch = s.charCodeAt(i);
    if (ch === C_DQUOTE) break;
    if (ch === C_BACKSLASH) {
      if (i + 1 >= s.length) throw invalid();
      out += s.slice(start, i);
      start = i + 1; // the escaped char is kept literally
      i += 2;
      continue;
    }
    i++;
  }
  c.i = i + 1;
  return out + s.slice(start, i);
}

/** Reads an identifier (bare or quoted). Returns '' when none starts at c.i. */
export function readName(c: Cursor): string {
  const s = c.s;
  const start = c.i;
  if (s.charCodeAt(start) === C_DQUOTE) {
    const name = readQuoted(c);
    if (name === '') throw invalid();
    return name;
  }
  let i = start;
  while (i < s.length && isIdentChar(s.charCodeAt(i))) i++;
  c.i = i;
  return s.slice(start, i);
}

/** At `->` (or `->>`): reads the arrow; null when none starts at c.i. */
export function readArrow(c: Cursor): '->' | '->>' | null {
  const s = c.s;
  if (s.charCodeAt(c.i) !== C_MINUS || s.charCodeAt(c.i + 1) !== C_GT) return null;
  if (s.charCodeAt(c.i + 2) === C_GT) {
    c.i += 3;
    return '->>';
  }
  c.i += 2;
  return '->';
}

export function isIndexKey(key: string): boolean {
  const n = key.length;
  let i = key.charCodeAt(0) === C_MINUS ? 1 : 0;
  if (i >= n || n - i > 9) return false;
  for (; i < n; i++) {
    const ch = key.charCodeAt(i);
    if (ch < C_0 || ch > C_9) return false;
  }
  return true;
}

export function pushStep(arrow: '->' | '->>', key: string, values: Value[]): JsonStep {
  return { arrow, slot: values.push(key) - 1, index: isIndexKey(key) };
}

/**
 * Reads `*( ( "->" | "->>" ) key )` at c.i (key = name or `-`digits), pushing each key.
 * Returns null when there is no path; `last` receives the last key.
 */
export function readPath(c: Cursor, values: Value[], last: { key: string }): JsonStep[] | null {
  let path: JsonStep[] | null = null;
  for (;;) {
    const arrow = readArrow(c);
    if (arrow === null) return path;
    let key: string;
    if (c.s.charCodeAt(c.i) === C_MINUS) {
      const start = c.i++;
      while (c.i < c.s.length && c.s.charCodeAt(c.i) >= C_0 && c.s.charCodeAt(c.i) <= C_9) c.i++;
      key = c.s.slice(start, c.i);
      if (key.length === 1) throw invalid();
    } else key = readName(c);
    if (key === '') throw invalid();
    (path ??= []).push(pushStep(arrow, key, values));
    last.key = key;
  }
}

/**
 * A filter key `column->a->>b` (verbatim text, as filter keys are): the column and the
 * steps, keys pushed in order. A key is the text up to the next `->` (or a quoted string).
 */
export function splitFilterKey(key: string, values: Value[]): { column: string; path: JsonStep[] | null } {
  const at = key.indexOf('->');
  if (at < 0) return { column: key, path: null };
  const column = key.slice(0, at);
  if (column === '') throw invalid();
  const c: Cursor = { s: key, i: at };
  const path: JsonStep[] = [];
  while (c.i < key.length) {
    const arrow = readArrow(c);
    if (arrow === null) throw invalid();
    let k: string;
    if (key.charCodeAt(c.i) === C_DQUOTE) k = readQuoted(c);
    else {
      const next = key.indexOf('->', c.i);
      const end = next < 0 ? key.length : next;
      k = key.slice(c.i, end);
      c.i = end;
    }
    if (k === '') throw invalid();
    path.push(pushStep(arrow, k, values));
  }
  return { column, path };
}

/** Reads [a-z]*; returns '' when none. */
export function readWord(c: Cursor): string {
  const s = c.s;
  const start = c.i;
  let i = start;
  while (i < s.length && isLower(s.charCodeAt(i))) i++;
  c.i = i;
  return s.slice(start, i);
}

/** After an item of a parenthesised list: `,` (passed, false: another item) or `)` (passed, true: the end); else invalid. */
export function endOfList(c: Cursor): boolean {
  const ch = c.s.charCodeAt(c.i);
  if (ch !== C_COMMA && ch !== C_RPAREN) throw invalid();
  c.i++;
  return ch === C_RPAREN;
}
