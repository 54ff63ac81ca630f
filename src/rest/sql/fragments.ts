/**
 * SQL fragments the builder assembles statements from (as PostgREST's SqlFragment): the
 * operator of each filter, value binding, the JSON output row and the CSV body.
 */
import type { BinaryOp, FtsOp, JsonStep } from '../grammar.ts';

/** Double-quotes an identifier. The only way catalog names enter SQL text. */
export function ident(name: string): string {
  return '"' + name.replaceAll('"', '""') + '"';
}

/** A SQL string literal of trusted text (builder output only, never user values). */
export function literal(text: string): string {
  return "'" + text.replaceAll("'", "''") + "'";
}

/** SQL operator for each binary operator . */
export const SQL_BINARY_OPS: Readonly<Record<BinaryOp, string>> = Object.freeze({
  eq: '=',
  neq: '<>',
  gt: '>',
  gte: '>=',
  lt: '<',
  lte: '<=',
  like: 'like',
  ilike: 'ilike',
  cs: '@>',
  cd: '<@',
  ov: '&&',
  sl: '<<',
  sr: '>>',
  // nxl "does not extend to the left of" is `&>`; nxr "… to the right of" is `&<` (PostgREST).
  nxl: '&>',
  nxr: '&<',
  adj: '-|-',
});

/** tsquery constructor for each full-text operator. */
export const SQL_FTS_FUNCS: Readonly<Record<FtsOp, string>> = Object.freeze({
  fts: 'to_tsquery',
  plfts: 'plainto_tsquery',
  phfts: 'phraseto_tsquery',
  wfts: 'websearch_to_tsquery',
});

/** An `in` list as one PostgreSQL array literal: every element quoted, `\` and `"` escaped. */
export function arrayLiteral(items: readonly string[]): string {
  let out = '{';
  for (let i = 0; i < items.length; i++) {
    if (i > 0) out += ',';
    out += '"' + items[i].replaceAll('\\', '\\\\').replaceAll('"', '\\"') + '"';
  }
  return out + '}';
}

/** `$n` typed as text, cast to the type `cast` (no second cast for text). */
export function castParam(n: number, cast: string): string {
  return cast === 'pg_catalog.text' ? `$${n}::text` : `$${n}::text::${cast}`;
}

/** A JSON path over a column expression; keys are parameters (`$n`, an int4 for an index). */
export function jsonPath(expr: string, path: readonly JsonStep[]): string {
  for (const p of path) expr = `(${expr} ${p.arrow} $${p.slot + 1}::text${p.index ? '::int4' : ''})`;
  return expr;
}

/** The outer select over a row source `_r`: body, n (and total). */
export function outer(singular: boolean): string {
  return singular
    ? `select case when count(*) = 1 then (json_agg(_r) -> 0)::text end as body, count(*)::int4 as n`
    : `select coalesce(json_agg(_r), '[]')::text as body, count(*)::int4 as n`;
}

/**
 * One CSV field (RFC 4180, quotes doubled), quoted where PostgREST's is (PostgreSQL's record
 * output): when it is empty or holds a quote, comma, white space or parenthesis.
 */
export function csvField(v: string): string {
  return v === '' || /[",\s()]/.test(v) ? '"' + v.replaceAll('"', '""') + '"' : v;
}

/**
 * The CSV records of `_r`, one a line (LF, as PostgREST): each row's values in column order,
 * NULL an empty field, quoted as csvField quotes (quotes doubled).
 */
export const CSV_BODY =
  `coalesce(string_agg((select string_agg(case when _c.v is null then '' when _c.v = '' or _c.v ~ '[",\\s()]' ` +
  `then '"' || replace(_c.v, '"', '""') || '"' else _c.v end, ',' order by _c.o) ` +
  `from json_each_text(to_json(_r)) with ordinality _c(k, v, o)), E'\\n'), '')`;
