/**
 * PostgREST-style query grammar (docs/api/rest.md) → AST.
 *
 * The parser knows nothing about the catalog: it checks syntax only. The planner
 * (plan.ts) checks names against the schema cache (unknown → 400 `unknown column in
 * request`); the builder (sql/build.ts) writes the SQL. User values never appear in the AST itself: each one is
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
import { STAR_SELECT, type Value, type FilterNode, type LogicNode, type ParsedQuery } from './grammar/ast.ts';
import { invalid } from './grammar/scan.ts';
import { parseSelect } from './grammar/select.ts';
import { parseFilter } from './grammar/filter.ts';
import { parseLogic } from './grammar/logic.ts';
import { parseOrder, parseLimitOffset } from './grammar/order.ts';
import { isEmbeddedKey, parseEmbedded } from './grammar/embedded.ts';
export * from './grammar/ast.ts';
export { parseSelect } from './grammar/select.ts';
export { parseFilter } from './grammar/filter.ts';
export { parseLogic } from './grammar/logic.ts';
export { parseOrder, parseLimitOffset } from './grammar/order.ts';


/**
 * Walks the query parameters once. `select`, `order`, `limit`, `offset` may appear at
 * most once (a repeat is `invalid request`); `or`, `and`, `not.or`, `not.and` and
 * column filters may repeat (all ANDed); `on_conflict` and `columns` are ignored.
 * Every other key is a column filter on a column of that exact name.
 *
 * `selectOnly` (a POST, which binds only what `select` needs): every parameter is checked as
 * usual, but when any of them carries a value the query is `select` alone, its values from
 * slot 0 (filters, order and paging mean nothing to an insert).
 */
export function parseQuery(
  params: URLSearchParams | Iterable<readonly [string, string]> | string,
  selectOnly = false,
  compat = false,
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
  // selectOnly: the other parameters are checked, their values kept apart and dropped.
  const others: Value[] = selectOnly ? [] : values;
  // Groups are parsed after the filters so slot numbering depends on shape only.
  let pendingLogic: string[] | null = null; // key, value, key, value, …
  let pendingEmbedded: [string, string][] | null = null;

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
        if (compat && isEmbeddedKey(key)) (pendingEmbedded ??= []).push([key, value]);
        else filters.push(parseFilter(key, value, others));
    }
  }

  const logic: LogicNode[] = [];
  if (pendingLogic !== null) {
    for (let i = 0; i < pendingLogic.length; i += 2) {
      const key = pendingLogic[i];
      const negated = key === 'not.or' || key === 'not.and';
      const kind = key === 'or' || key === 'not.or' ? 'or' : 'and';
      logic.push(parseLogic(kind, pendingLogic[i + 1], negated, others));
    }
  }

  const selected = select === null ? STAR_SELECT : parseSelect(select, values, compat);
  const ordered = order === null ? [] : parseOrder(order, others);
  const embedded = pendingEmbedded === null ? null : parseEmbedded(pendingEmbedded, others);
  if (selectOnly && (values.length > 0 || others.length > 0)) {
    return { select: selected, filters: [], logic: [], order: [], limit: null, offset: null, values };
  }
  // A POST's embedded parameters, like its filters, mean nothing to an insert.
  if (embedded === null || selectOnly) return { select: selected, filters, logic, order: ordered, limit, offset, values };
  return { select: selected, filters, logic, order: ordered, limit, offset, values, embedded };
}
