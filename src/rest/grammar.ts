/**
 * PostgREST-style query grammar (docs/api/rest.md) → AST.
 *
 * The parser knows nothing about the catalog: it checks syntax only. The compiler
 * checks names against the schema cache (unknown → 400 `unknown column in request`)
 * and turns the AST into SQL. User values never appear in the AST itself: each one is
 * pushed onto a flat `values` array and nodes refer to it by slot index, so the SQL
 * text depends only on the *shape* (see `shapeOf`) and values are bound as `$n`.
 *
 *   select   = [ item *( "," item ) ]            ; absent / empty / blank → "*"
 *   item     = "*"
 *            | [ alias ":" ] field [ "::" cast ]                      ; cast: a name of CASTS
 *            | [ alias ":" ] name [ "!" hint ] [ "!" join ] "(" item *( "," item ) ")"   ; embed, ≤ 3 levels deep
 *            | "..." name [ "!" hint ] [ "!" join ] "(" item *( "," item ) ")"   ; spread (to-one) embed
 *   join     = "inner" | "left"                  ; inner: only rows that have a related row
 *   field    = name *( ( "->" | "->>" ) key )    ; JSON path; key = name | [ "-" ] 1*DIGIT
 *   alias, hint = name
 *   name     = 1*( ALPHA / DIGIT / "_" / "$" / non-ASCII ) | quoted
 *   quoted   = DQUOTE *( any-but-DQUOTE-or-"\" | "\" any ) DQUOTE
 *
 *   {column} = [ "not." ] op "." value           ; value = rest of the parameter, verbatim
 *              ; the key may carry a JSON path: column *( ( "->" | "->>" ) key ), key verbatim or quoted
 *   op       = eq | neq | gt | gte | lt | lte    ; scalar
 *            | like | ilike                      ; "*" → "%"
 *            | ( cmp | like | ilike ) "(" ( "any" | "all" ) ")"   ; value: "{a,b}" array literal
 *            | is                                ; null | true | false | unknown (any case)
 *            | in                                ; list
 *            | cs | cd | ov                      ; "{…}" array literal, or "[…]"/"(…)" range literal
 *            | sl | sr | nxl | nxr | adj         ; "[…]"/"(…)" range literal
 *            | ( fts | plfts | phfts | wfts ) [ "(" lang ")" ]   ; lang = 1*( ALNUM / "_" )
 *   list     = "(" [ elem *( "," elem ) ] ")"    ; elem = quoted | *( any-but-","-or-")" )
 *
 *   or / and / not.or / not.and = group
 *   group    = "(" term *( "," term ) ")"
 *   term     = [ "not." ] ( "and" | "or" ) group
 *            | field "." [ "not." ] op "." gvalue
 *   gvalue   = quoted | list (in) | "{…}" / "[…]" / "(…)" (cs cd ov and range ops)
 *            | *( any-but-","-or-")" )          ; trimmed
 *
 *   order    = oterm *( "," oterm )              ; oterm = field [ ".asc" | ".desc" ] [ ".nullsfirst" | ".nullslast" ]
 *   limit / offset = 1*DIGIT
 *
 * Everything is scanned left to right with an index over the input (no regexes, no
 * splitting), so parsing is linear and allocates little beyond the AST itself.
 * Whitespace is tolerated around select items, group terms, list elements and order terms.
 */

export const INVALID_REQUEST = 'invalid request';
export const INVALID_EMBED = 'invalid embed in request';

/** A syntax error in the query. `message` (= `publicMessage`) is what the client sees, with status 400. */
export class GrammarError extends Error {
  readonly status = 400;
  readonly publicMessage: string;
  constructor(publicMessage: string) {
    super(publicMessage);
    this.name = 'GrammarError';
    this.publicMessage = publicMessage;
  }
}

/** Embeds may nest this many levels below the top-level table. */
export const MAX_EMBED_DEPTH = 3;
/** Nesting limit for and()/or() groups (guards the recursion; not part of the API). */
export const MAX_LOGIC_DEPTH = 32;
/** Aliases become output names, which PostgreSQL would cut at 63 bytes: longer is refused. */
export const MAX_ALIAS_BYTES = 63;

/** The casts `select` accepts (`col::name`), each to one fixed built-in type. */
export const CASTS: Readonly<Record<string, string>> = Object.freeze({
  text: 'pg_catalog.text',
  varchar: 'pg_catalog.varchar',
  int: 'pg_catalog.int4',
  integer: 'pg_catalog.int4',
  int2: 'pg_catalog.int2',
  smallint: 'pg_catalog.int2',
  int4: 'pg_catalog.int4',
  int8: 'pg_catalog.int8',
  bigint: 'pg_catalog.int8',
  numeric: 'pg_catalog.numeric',
  float4: 'pg_catalog.float4',
  real: 'pg_catalog.float4',
  float8: 'pg_catalog.float8',
  bool: 'pg_catalog.bool',
  boolean: 'pg_catalog.bool',
  date: 'pg_catalog.date',
  time: 'pg_catalog.time',
  timestamp: 'pg_catalog.timestamp',
  timestamptz: 'pg_catalog.timestamptz',
  interval: 'pg_catalog.interval',
  uuid: 'pg_catalog.uuid',
  json: 'pg_catalog.json',
  jsonb: 'pg_catalog.jsonb',
});

// ---------------------------------------------------------------------------
// AST
// ---------------------------------------------------------------------------

/** A bound value: a scalar as text, or (for `in`) a list bound as one text[] parameter. */
export type Value = string | string[];

/** One `->` / `->>` step of a JSON path; the key is a bound value, `values[slot]`. */
export interface JsonStep {
  readonly arrow: '->' | '->>';
  readonly slot: number;
  /** The key is an integer: an array index (bound as int4). */
  readonly index: boolean;
}

/** Optional fields are present only when written, so a plain column is `{kind, name}`. */
export interface ColumnItem {
  readonly kind: 'column';
  readonly name: string;
  /** `alias:`: the output name. */
  readonly alias?: string;
  /** JSON path steps (never empty when present). */
  readonly path?: readonly JsonStep[];
  /** With a path and no alias: the last key, the output name (as PostgREST names it). */
  readonly key?: string;
  /** `::cast`: a key of CASTS (after an aggregate: of its result). */
  readonly cast?: string;
  /** `.sum()` … after the field, or `count()` alone (then `name` is `*`): an aggregate. */
  readonly aggregate?: Aggregate;
}

/** The aggregates `select` takes (`col.sum()`, `count()`), when the catalog allows them. */
export type Aggregate = 'count' | 'sum' | 'avg' | 'max' | 'min';
const AGGREGATES: ReadonlySet<string> = new Set(['count', 'sum', 'avg', 'max', 'min']);

export interface EmbedItem {
  readonly kind: 'embed';
  readonly relation: string;
  readonly select: SelectNode;
  readonly alias?: string;
  /** `!hint`: a foreign key's name, one of its columns, or a junction's name. */
  readonly hint?: string;
  /** `...relation(…)`: the related row's columns flattened into this row. */
  readonly spread?: true;
  /** `!inner`: only rows with at least one related row (`!left`, the default, is not kept). */
  readonly inner?: true;
}

export type SelectItem = { readonly kind: 'star' } | ColumnItem | EmbedItem;

export interface SelectNode {
  readonly items: readonly SelectItem[];
}

/** Comparison / pattern / array / range operators: `column <sqlop> $slot`. */
export type BinaryOp =
  | 'eq'
  | 'neq'
  | 'gt'
  | 'gte'
  | 'lt'
  | 'lte'
  | 'like'
  | 'ilike'
  | 'cs'
  | 'cd'
  | 'ov'
  | 'sl'
  | 'sr'
  | 'nxl'
  | 'nxr'
  | 'adj';
export type FtsOp = 'fts' | 'plfts' | 'phfts' | 'wfts';
export type IsValue = 'null' | 'true' | 'false' | 'unknown';
export type FilterOp = BinaryOp | FtsOp | 'in' | 'is';

interface FilterCommon {
  readonly kind: 'filter';
  /** As written; may be anything (e.g. `relation.column`): the compiler checks it. */
  readonly column: string;
  /** `not.` prefix: wrap the predicate in NOT (…). */
  readonly negated: boolean;
  /** `column->a->>b`: JSON path steps (never empty when present); their slots come before the value's. */
  readonly path?: readonly JsonStep[];
}
/** `values[slot]` is a string (like/ilike already have `*` → `%`). */
export interface BinaryFilter extends FilterCommon {
  readonly op: BinaryOp;
  readonly slot: number;
  /** `op(any)` / `op(all)`: the value is an array literal `{…}`, compared with any / all of it. */
  readonly quant?: 'any' | 'all';
}
/** `values[slot]` is a string[]; compile as `column = any($slot)` (empty list → false). */
export interface InFilter extends FilterCommon {
  readonly op: 'in';
  readonly slot: number;
}
/** No value slot: IS NULL / TRUE / FALSE / UNKNOWN is part of the shape. */
export interface IsFilter extends FilterCommon {
  readonly op: 'is';
  readonly value: IsValue;
}
/** `values[slot]` is the query text; `langSlot`, when not null, is the regconfig name. */
export interface FtsFilter extends FilterCommon {
  readonly op: FtsOp;
  readonly slot: number;
  readonly langSlot: number | null;
}
export type FilterNode = BinaryFilter | InFilter | IsFilter | FtsFilter;

export interface LogicNode {
  readonly kind: 'logic';
  readonly op: 'and' | 'or';
  readonly negated: boolean;
  /** Never empty. */
  readonly children: readonly (FilterNode | LogicNode)[];
}

export interface OrderTerm {
  readonly column: string;
  /** JSON path steps (never empty when present). */
  readonly path?: readonly JsonStep[];
  readonly direction: 'asc' | 'desc';
  /** null: PostgreSQL's default for the direction. */
  readonly nulls: 'first' | 'last' | null;
}

export interface ParsedQuery {
  readonly select: SelectNode;
  /** Top-level column filters, in parameter order; all ANDed. */
  readonly filters: FilterNode[];
  /** `or` / `and` / `not.or` / `not.and` groups, in parameter order; ANDed with the filters. */
  readonly logic: LogicNode[];
  readonly order: OrderTerm[];
  readonly limit: number | null;
  readonly offset: number | null;
  /**
   * Bound values, slot-indexed. Slots are assigned filters first, then logic groups,
   * then JSON path keys of `select`, then those of `order`, each depth-first left to right
   * (a filter: its path keys, then its value; fts: term, then language), so two queries
   * with the same `shapeOf` have the same slot layout and the same `values.length`.
   */
  readonly values: Value[];
}

/** The select used when `select` is absent or blank. Shared and frozen: do not mutate. */
export const STAR_SELECT: SelectNode = Object.freeze({
  items: Object.freeze([Object.freeze({ kind: 'star' as const })]),
});

// ---------------------------------------------------------------------------
// Scanner helpers
// ---------------------------------------------------------------------------

const C_TAB = 9;
const C_LF = 10;
const C_CR = 13;
const C_SPACE = 32;
const C_DQUOTE = 34;
const C_DOLLAR = 36;
const C_LPAREN = 40;
const C_RPAREN = 41;
const C_STAR = 42;
const C_COMMA = 44;
const C_MINUS = 45;
const C_DOT = 46;
const C_0 = 48;
const C_9 = 57;
const C_COLON = 58;
const C_GT = 62;
const C_BANG = 33;
const C_A = 65;
const C_Z = 90;
const C_LBRACKET = 91;
const C_BACKSLASH = 92;
const C_RBRACKET = 93;
const C_UNDERSCORE = 95;
const C_a = 97;
const C_z = 122;
const C_LBRACE = 123;
const C_RBRACE = 125;

function invalid(): GrammarError {
  return new GrammarError(INVALID_REQUEST);
}
function invalidEmbed(): GrammarError {
  return new GrammarError(INVALID_EMBED);
}

function isWs(c: number): boolean {
  return c === C_SPACE || c === C_TAB || c === C_LF || c === C_CR;
}
function isIdentChar(c: number): boolean {
  return (
    (c >= C_a && c <= C_z) ||
    (c >= C_A && c <= C_Z) ||
    (c >= C_0 && c <= C_9) ||
    c === C_UNDERSCORE ||
    c === C_DOLLAR ||
    c >= 0x80
  );
}
function isLower(c: number): boolean {
  return c >= C_a && c <= C_z;
}

/** Mutable scan position over one input string. One per parse call. */
interface Cursor {
  readonly s: string;
  i: number;
}

function skipWs(c: Cursor): void {
  const s = c.s;
  let i = c.i;
  while (i < s.length && isWs(s.charCodeAt(i))) i++;
  c.i = i;
}

/** Trims whitespace of s[from, to) and returns the slice. */
function sliceTrim(s: string, from: number, to: number): string {
  while (from < to && isWs(s.charCodeAt(from))) from++;
  while (to > from && isWs(s.charCodeAt(to - 1))) to--;
  return s.slice(from, to);
}

/** At a `"`: reads a quoted string with `\x` → `x` escapes; leaves c.i after the closing quote. */
function readQuoted(c: Cursor): string {
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
function readName(c: Cursor): string {
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
function readArrow(c: Cursor): '->' | '->>' | null {
  const s = c.s;
  if (s.charCodeAt(c.i) !== C_MINUS || s.charCodeAt(c.i + 1) !== C_GT) return null;
  if (s.charCodeAt(c.i + 2) === C_GT) {
    c.i += 3;
    return '->>';
  }
  c.i += 2;
  return '->';
}

function isIndexKey(key: string): boolean {
  const n = key.length;
  let i = key.charCodeAt(0) === C_MINUS ? 1 : 0;
  if (i >= n || n - i > 9) return false;
  for (; i < n; i++) {
    const ch = key.charCodeAt(i);
    if (ch < C_0 || ch > C_9) return false;
  }
  return true;
}

function pushStep(arrow: '->' | '->>', key: string, values: Value[]): JsonStep {
  return { arrow, slot: values.push(key) - 1, index: isIndexKey(key) };
}

/**
 * Reads `*( ( "->" | "->>" ) key )` at c.i (key = name or `-`digits), pushing each key.
 * Returns null when there is no path; `last` receives the last key.
 */
function readPath(c: Cursor, values: Value[], last: { key: string }): JsonStep[] | null {
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
function splitFilterKey(key: string, values: Value[]): { column: string; path: JsonStep[] | null } {
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
function readWord(c: Cursor): string {
  const s = c.s;
  const start = c.i;
  let i = start;
  while (i < s.length && isLower(s.charCodeAt(i))) i++;
  c.i = i;
  return s.slice(start, i);
}

// ---------------------------------------------------------------------------
// select
// ---------------------------------------------------------------------------

/**
 * Parses the `select` parameter. Absent, empty or blank → `STAR_SELECT`.
 * Embed errors (depth > 3, `rel(count)`, `rel()`, unbalanced parens) → `invalid embed in request`;
 * other syntax errors → `invalid request`.
 */
export function parseSelect(select: string | undefined | null, values: Value[] = []): SelectNode {
  if (select == null) return STAR_SELECT;
  const c: Cursor = { s: select, i: 0 };
  skipWs(c);
  if (c.i === select.length) return STAR_SELECT;
  const node = parseSelectList(c, 0, values);
  // parseSelectList at depth 0 stops only at end of input or a stray ')'.
  if (c.i < select.length) throw invalidEmbed();
  return node;
}

/** Parses items up to end of input (depth 0) or the closing ')' (depth > 0, left unconsumed). */
function parseSelectList(c: Cursor, depth: number, values: Value[]): SelectNode {
  const s = c.s;
  const items: SelectItem[] = [];
  for (;;) {
    skipWs(c);
    items.push(parseSelectItem(c, depth, values));
    skipWs(c);
    if (c.i >= s.length) {
      if (depth > 0) throw invalidEmbed(); // unclosed '('
      break;
    }
    const ch = s.charCodeAt(c.i);
    if (ch === C_COMMA) {
      c.i++;
      continue;
    }
    if (ch === C_RPAREN) break; // end of embed, or a stray ')' at depth 0 (caller rejects)
    if (ch === C_LPAREN) throw invalidEmbed(); // `*(id)`
    throw invalid();
  }
  return { items };
}

/** An alias or JSON key that names an output column: at most 63 bytes, no NUL. */
function isOutputName(name: string): boolean {
  return Buffer.byteLength(name) <= MAX_ALIAS_BYTES && !name.includes('\u0000');
}

function parseSelectItem(c: Cursor, depth: number, values: Value[]): SelectItem {
  const s = c.s;
  const ch = s.charCodeAt(c.i);
  if (ch === C_STAR) {
    c.i++;
    return STAR_SELECT.items[0];
  }
  if (ch === C_LPAREN || ch === C_RPAREN) throw invalidEmbed(); // `(id)`, `a,)`
  const spread = s.startsWith('...', c.i);
  if (spread) c.i += 3;
  let name = readName(c);
  if (name === '') throw invalid(); // empty item or a character that cannot start a name
  let alias: string | undefined;
  if (s.charCodeAt(c.i) === C_COLON && s.charCodeAt(c.i + 1) !== C_COLON) {
    // `alias:` — not on a spread, whose columns keep their own names.
    if (spread || !isOutputName(name)) throw invalid();
    alias = name;
    c.i++;
    skipWs(c);
    name = readName(c);
    if (name === '') throw invalid();
  }
  let hint: string | undefined;
  let join: string | undefined;
  if (s.charCodeAt(c.i) === C_BANG) {
    // `!hint`, `!inner` / `!left`, or `!hint!inner`.
    while (s.charCodeAt(c.i) === C_BANG) {
      c.i++;
      const w = readName(c);
      if (w === '') throw invalidEmbed();
      if (w === 'inner' || w === 'left') {
        if (join !== undefined) throw invalidEmbed();
        join = w;
      } else {
        if (hint !== undefined || join !== undefined) throw invalidEmbed();
        hint = w;
      }
    }
    skipWs(c);
    if (s.charCodeAt(c.i) !== C_LPAREN) throw invalidEmbed(); // a hint only on an embed
  }
  if (!spread && hint === undefined && join === undefined) {
    const last = { key: '' };
    const path = readPath(c, values, last);
    let cast: string | undefined;
    let aggregate: Aggregate | undefined;
    if (s.charCodeAt(c.i) === C_DOT) {
      // `.sum()`: an aggregate of the field (the parentheses are empty).
      c.i++;
      const w = readWord(c);
      if (!AGGREGATES.has(w) || s.charCodeAt(c.i) !== C_LPAREN || s.charCodeAt(c.i + 1) !== C_RPAREN) throw invalid();
      c.i += 2;
      aggregate = w as Aggregate;
    }
    if (s.charCodeAt(c.i) === C_COLON && s.charCodeAt(c.i + 1) === C_COLON) {
      c.i += 2;
      const w = readName(c).toLowerCase();
      if (!Object.hasOwn(CASTS, w)) throw invalid();
      cast = w;
    }
    skipWs(c);
    if (s.charCodeAt(c.i) !== C_LPAREN || path !== null || cast !== undefined || aggregate !== undefined) {
      const item: { kind: 'column'; name: string; alias?: string; path?: JsonStep[]; key?: string; cast?: string; aggregate?: Aggregate } = {
        kind: 'column',
        name,
      };
      if (aggregate !== undefined) item.aggregate = aggregate;
      if (alias !== undefined) item.alias = alias;
      if (path !== null) {
        item.path = path;
        if (alias === undefined) {
          if (!isOutputName(last.key)) throw invalid();
          item.key = last.key;
        }
      }
      if (cast !== undefined) item.cast = cast;
      return item;
    }
  }
  // Embed.
  if (s.charCodeAt(c.i) !== C_LPAREN) throw invalidEmbed(); // `...rel` without a list
  if (depth + 1 > MAX_EMBED_DEPTH) throw invalidEmbed();
  c.i++;
  skipWs(c);
  if (c.i >= s.length) throw invalidEmbed(); // `rel(`
  // `rel()`: an empty embed (no columns; with `!inner` it narrows the rows).
  const inner: SelectNode = s.charCodeAt(c.i) === C_RPAREN ? { items: [] } : parseSelectList(c, depth + 1, values);
  c.i++; // the ')' that ends the list
  if (inner.items.length === 0 && name === 'count' && !spread && hint === undefined && join === undefined) {
    // `count()`: the number of rows (of the group), an aggregate; `::cast` may follow.
    const item: { kind: 'column'; name: string; alias?: string; cast?: string; aggregate: Aggregate } = { kind: 'column', name: '*', aggregate: 'count' };
    if (alias !== undefined) item.alias = alias;
    if (s.charCodeAt(c.i) === C_COLON && s.charCodeAt(c.i + 1) === C_COLON) {
      c.i += 2;
      const w = readName(c).toLowerCase();
      if (!Object.hasOwn(CASTS, w)) throw invalid();
      item.cast = w;
    }
    return item;
  }
  if (inner.items.length === 1) {
    const only = inner.items[0];
    if (only.kind === 'column' && only.name === 'count' && only.path === undefined) throw invalidEmbed(); // `rel(count)`
  }
  const embed: { kind: 'embed'; relation: string; select: SelectNode; alias?: string; hint?: string; spread?: true; inner?: true } = {
    kind: 'embed',
    relation: name,
    select: inner,
  };
  if (alias !== undefined) embed.alias = alias;
  if (hint !== undefined) embed.hint = hint;
  if (spread) embed.spread = true;
  if (join === 'inner') embed.inner = true;
  return embed;
}

// ---------------------------------------------------------------------------
// filters
// ---------------------------------------------------------------------------

// Operator classes (internal).
const K_CMP = 1; // eq neq gt gte lt lte
const K_LIKE = 2; // like ilike
const K_ARRAY = 3; // cs cd ov
const K_RANGE = 4; // sl sr nxl nxr adj
const K_IS = 5;
const K_IN = 6;
const K_FTS = 7;

function opClass(op: string): number {
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
interface OpHead {
  negated: boolean;
  op: string;
  kind: number;
  lang: string | null;
  quant: 'any' | 'all' | null;
}

/** Scans `[not.]op[(lang)].` at c.i; leaves c.i at the first char of the value. */
function readOpHead(c: Cursor, head: OpHead): void {
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
function readList(c: Cursor): string[] {
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

function isRangeLiteral(v: string): boolean {
  const n = v.length;
  if (n < 2) return false;
  const a = v.charCodeAt(0);
  const b = v.charCodeAt(n - 1);
  return (a === C_LBRACKET || a === C_LPAREN) && (b === C_RBRACKET || b === C_RPAREN);
}
function isArrayLiteral(v: string): boolean {
  const n = v.length;
  return n >= 2 && v.charCodeAt(0) === C_LBRACE && v.charCodeAt(n - 1) === C_RBRACE;
}

function isValueOf(v: string): IsValue {
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
function makeFilter(column: string, head: OpHead, value: string, values: Value[], path: JsonStep[] | null = null): FilterNode {
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

// ---------------------------------------------------------------------------
// or / and groups
// ---------------------------------------------------------------------------

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
function parseGroup(
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
function tryGroupOpen(c: Cursor): 'and' | 'or' | null {
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

function parseTerm(c: Cursor, depth: number, head: OpHead, values: Value[]): FilterNode | LogicNode {
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

/** After an item of a parenthesised list: `,` (passed, false: another item) or `)` (passed, true: the end); else invalid. */
function endOfList(c: Cursor): boolean {
  const ch = c.s.charCodeAt(c.i);
  if (ch !== C_COMMA && ch !== C_RPAREN) throw invalid();
  c.i++;
  return ch === C_RPAREN;
}

/**
 * Scans a literal from `i`, passing over quoted strings, to just after the character that
 * `closes` says ends it; returns that index. The end of the input before it is invalid.
 */
function scanLiteral(c: Cursor, i: number, closes: (ch: number) => boolean): number {
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
function readGroupValue(c: Cursor, kind: number): string {
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

// ---------------------------------------------------------------------------
// order, limit, offset
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// whole query
// ---------------------------------------------------------------------------

/**
 * Walks the query parameters once. `select`, `order`, `limit`, `offset` may appear at
 * most once (a repeat is `invalid request`); `or`, `and`, `not.or`, `not.and` and
 * column filters may repeat (all ANDed); `on_conflict` and `columns` are ignored.
 * Every other key is a column filter on a column of that exact name.
 */
export function parseQuery(
  params: URLSearchParams | Iterable<readonly [string, string]> | string,
): ParsedQuery {
  // No query string (a POST, a GET of a whole table): nothing to walk, nothing to allocate.
  const it: Iterable<readonly [string, string]> =
    typeof params !== 'string' ? params : params === '' ? [] : new URLSearchParams(params);
  // select and order are parsed after the filters and groups (their JSON path keys take the
  // slots after those), in that order.
  let select: string | null = null;
  let order: string | null = null;
  let limit: number | null = null;
  let offset: number | null = null;
  const filters: FilterNode[] = [];
  const values: Value[] = [];
  // Groups are parsed after the filters so slot numbering depends on shape only.
  let pendingLogic: string[] | null = null; // key, value, key, value, …

  for (const [key, value] of it) {
    switch (key) {
      case 'select':
        if (select !== null) throw invalid();
        select = value;
        break;
      case 'order':
        if (order !== null) throw invalid();
        order = value;
        break;
      case 'limit':
        if (limit !== null) throw invalid();
        limit = parseLimitOffset(value);
        break;
      case 'offset':
        if (offset !== null) throw invalid();
        offset = parseLimitOffset(value);
        break;
      case 'or':
      case 'and':
      case 'not.or':
      case 'not.and':
        (pendingLogic ??= []).push(key, value);
        break;
      case 'on_conflict':
      case 'columns':
        break;
      default:
        filters.push(parseFilter(key, value, values));
    }
  }

  const logic: LogicNode[] = [];
  if (pendingLogic !== null) {
    for (let i = 0; i < pendingLogic.length; i += 2) {
      const key = pendingLogic[i];
      const negated = key === 'not.or' || key === 'not.and';
      const kind = key === 'or' || key === 'not.or' ? 'or' : 'and';
      logic.push(parseLogic(kind, pendingLogic[i + 1], negated, values));
    }
  }

  return {
    select: select === null ? STAR_SELECT : parseSelect(select, values),
    filters,
    logic,
    order: order === null ? [] : parseOrder(order, values),
    limit,
    offset,
    values,
  };
}
