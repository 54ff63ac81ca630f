/**
 * What request work is written with on a lane: `c\`select … ${value}\`` and
 * `c.unsafe(text, params)`, the two forms the areas use, each making a `LaneQuery` (the text
 * with `$n` placeholders and its parameters, not yet sent). The values go out as text, typed
 * as the `postgres` driver types them (so that a statement reads the same on a lane and on
 * the owner pool), and rows come back parsed as that driver parses them: numbers, booleans,
 * JSON, dates, bytea and the arrays of built-in types; every other type as its text.
 */

export type Row = Record<string, unknown>;

/** The rows of a statement, and its command tag's verb and row count (as the driver's RowList has them). */
export type Rows<R extends Row = Row> = R[] & { count: number; command: string };

/** A statement to run on a lane: its text and its parameters, in wire form (text or null) with their type OIDs (0: the server infers). */
export interface LaneQuery {
  readonly text: string;
  readonly values: ReadonlyArray<string | null>;
  readonly types: readonly number[];
}

/** The per-query options the areas pass; a lane always prepares (or, behind a pooler, sends unnamed statements). */
export interface LaneQueryOptions {
  prepare?: boolean;
  simple?: boolean;
}

export interface LaneSql {
  (strings: TemplateStringsArray, ...values: readonly unknown[]): LaneQuery;
  unsafe(text: string, params?: readonly unknown[], options?: LaneQueryOptions): LaneQuery;
}

const BOOL = 16;
const BYTEA = 17;
const INT8 = 20;
const TIMESTAMPTZ = 1184;

/** The type OID a value is sent with (the driver's `inferType`): 0 lets the server infer it from the statement. */
function typeOf(x: unknown): number {
  if (x instanceof Date) return TIMESTAMPTZ;
  if (x instanceof Uint8Array) return BYTEA;
  if (x === true || x === false) return BOOL;
  if (typeof x === 'bigint') return INT8;
  return 0;
}

function arrayElement(x: unknown): string {
  if (x === null || x === undefined) return 'NULL';
  if (Array.isArray(x)) return arrayLiteral(x);
  return '"' + serialize(x)!.replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"';
}

function arrayLiteral(xs: readonly unknown[]): string {
  return '{' + xs.map(arrayElement).join(',') + '}';
}

/** A value in PostgreSQL's text form; null for SQL NULL. */
export function serialize(x: unknown): string | null {
  if (x === null || x === undefined) return null;
  if (typeof x === 'string') return x;
  if (typeof x === 'number' || typeof x === 'bigint') return String(x);
  if (x === true) return 't';
  if (x === false) return 'f';
  if (x instanceof Date) return x.toISOString();
  if (x instanceof Uint8Array) return '\\x' + Buffer.from(x).toString('hex');
  if (Array.isArray(x)) return arrayLiteral(x);
  return JSON.stringify(x);
}

function query(text: string, params: readonly unknown[]): LaneQuery {
  return { text, values: params.map(serialize), types: params.map((p) => (Array.isArray(p) ? 0 : typeOf(p))) };
}

/** The builder a lane hands to `withContext`'s work. */
export const laneSql: LaneSql = Object.assign(
  (strings: TemplateStringsArray, ...values: readonly unknown[]): LaneQuery => {
    let text = strings[0];
    for (let i = 1; i < strings.length; i++) text += '$' + i + strings[i];
    return query(text, values);
  },
  { unsafe: (text: string, params: readonly unknown[] = []): LaneQuery => query(text, params) },
);

// ---------------------------------------------------------------------------------------
// Rows: text in, values out.

type Parse = (x: string) => unknown;

const asNumber: Parse = (x) => +x;
const asJson: Parse = (x) => JSON.parse(x);
const asBool: Parse = (x) => x === 't';
const asDate: Parse = (x) => new Date(x);
const asBytea: Parse = (x) => Buffer.from(x.slice(2), 'hex');

/** Scalar types parsed from text (the driver's defaults); any other type stays text. */
const SCALARS: Record<number, Parse> = {
  21: asNumber, // int2
  23: asNumber, // int4
  26: asNumber, // oid
  700: asNumber, // float4
  701: asNumber, // float8
  16: asBool,
  114: asJson, // json
  3802: asJson, // jsonb
  1082: asDate, // date
  1114: asDate, // timestamp
  1184: asDate, // timestamptz
  17: asBytea,
};

/** Array types of the built-in element types (pg_type.typarray → typelem), parsed to arrays. */
const ARRAYS: Record<number, number> = {
  1000: 16, 1001: 17, 1005: 21, 1007: 23, 1016: 20, 1028: 26, 1021: 700, 1022: 701, 1231: 1700,
  1009: 25, 1015: 1043, 1014: 1042, 1003: 19, 2951: 2950, 199: 114, 3807: 3802,
  1182: 1082, 1115: 1114, 1185: 1184,
};

/** An array literal (`{1,2}`, `{"a b",NULL}`, nested) with each element parsed by `element`. */
export function parseArray(text: string, element: Parse | undefined): unknown {
  let i = 0;
  const value = (): unknown[] => {
    const out: unknown[] = [];
    i++; // '{'
    while (i < text.length) {
      const ch = text[i];
      if (ch === '}') {
        i++;
        return out;
      }
      if (ch === ',') {
        i++;
        continue;
      }
      if (ch === '{') {
        out.push(value());
        continue;
      }
      let s = '';
      let quoted = false;
      if (ch === '"') {
        quoted = true;
        i++;
        while (i < text.length && text[i] !== '"') {
          if (text[i] === '\\') i++;
          s += text[i++];
        }
        i++;
      } else {
        while (i < text.length && text[i] !== ',' && text[i] !== '}') s += text[i++];
      }
      out.push(!quoted && s === 'NULL' ? null : element ? element(s) : s);
    }
    return out;
  };
  // A lower bound other than 1 prefixes the literal (`[0:1]={…}`): the elements are what count.
  const start = text.indexOf('{');
  if (start < 0) return text;
  i = start;
  return value();
}

/** How a column of type `oid` is read, or null to keep its text. */
export function parserFor(oid: number): Parse | null {
  const scalar = SCALARS[oid];
  if (scalar) return scalar;
  const element = ARRAYS[oid];
  if (element === undefined) return null;
  const parseElement = SCALARS[element];
  return (x) => parseArray(x, parseElement);
}
