/**
 * SUPABASE_COMPAT=true: query parameters on an embedded level, as PostgREST reads them
 * (`books.title=eq.x`, `books.or=(…)`, `books.order=title.desc`, `books.limit=2`,
 * `books.offset=1`, deeper levels as `books.chapters.title=…`). The key's part before its
 * first `->` is split at `.`: the last name is the column (or `or`, `and`, `not.or`,
 * `not.and`, `order`, `limit`, `offset`), the names before it the embeds' path. Parsed after
 * every top-level parameter, so their values take the slots after the top level's (the
 * shape, shape.ts, records them in order). (The whole grammar: ../grammar.ts.)
 */
import type { EmbeddedQuery, FilterNode, LogicNode, OrderTerm, Value } from './ast.ts';
import { parseFilter } from './filter.ts';
import { parseLogic } from './logic.ts';
import { parseLimitOffset, parseOrder } from './order.ts';
import { invalid } from './scan.ts';

/** Whether `key` names an embedded level's parameter (a `.` before any `->`). */
export function isEmbeddedKey(key: string): boolean {
  const arrow = key.indexOf('->');
  const dot = key.indexOf('.');
  return dot > 0 && (arrow < 0 || dot < arrow) && !key.startsWith('not.');
}

interface Level {
  path: string[];
  filters: FilterNode[];
  logic: LogicNode[];
  order: OrderTerm[] | null;
  limit: number | null;
  offset: number | null;
}

/** The embedded levels' parameters (key, value pairs in order) → one query per path, values pushed onto `values`. */
export function parseEmbedded(pairs: readonly (readonly [string, string])[], values: Value[]): EmbeddedQuery[] {
  const levels = new Map<string, Level>();
  const out: Level[] = [];
  for (const [key, value] of pairs) {
    const arrow = key.indexOf('->');
    const head = arrow < 0 ? key : key.slice(0, arrow);
    const names = head.split('.');
    let last = names.pop()!;
    let negated = false;
    if ((last === 'or' || last === 'and') && names.length > 1 && names[names.length - 1] === 'not') {
      names.pop();
      negated = true;
    }
    if (names.length === 0 || names.some((n) => n === '') || last === '') throw invalid();
    const id = names.join('\u0000');
    let level = levels.get(id);
    if (level === undefined) {
      level = { path: names, filters: [], logic: [], order: null, limit: null, offset: null };
      levels.set(id, level);
      out.push(level);
    }
    if (arrow >= 0) last += key.slice(arrow);
    if (arrow < 0 && (last === 'or' || last === 'and')) level.logic.push(parseLogic(last, value, negated, values));
    else if (arrow < 0 && last === 'order') {
      if (level.order !== null) throw invalid();
      level.order = parseOrder(value, values);
    } else if (arrow < 0 && (last === 'limit' || last === 'offset')) {
      if (level[last] !== null) throw invalid();
      level[last] = values.length;
      values.push(String(parseLimitOffset(value)));
    } else level.filters.push(parseFilter(last, value, values));
  }
  return out.map((l) => ({ path: l.path, filters: l.filters, logic: l.logic, order: l.order ?? [], limit: l.limit, offset: l.offset }));
}
