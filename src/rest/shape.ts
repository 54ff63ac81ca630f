/**
 * Plan-cache keys: the shape of a parsed query, equal for two queries that differ only in
 * bound values. The planner keys the SQL text by it (with the method, relation, body columns
 * and Prefer), so one statement text serves every request of that shape.
 */
import type { JsonStep, FilterNode, LogicNode, ParsedQuery, SelectNode } from './grammar.ts';

/** Length-prefixed name: unambiguous whatever characters the name holds. */
function nameKey(name: string): string {
  return name.length + ':' + name;
}

function pathShape(path: readonly JsonStep[] | undefined): string {
  if (path === undefined) return '';
  let out = '';
  for (const p of path) out += p.arrow + (p.index ? 'i' : 'k');
  return out;
}

function selectShape(node: SelectNode): string {
  let out = '';
  for (const item of node.items) {
    if (item.kind === 'star') out += '*,';
    else if (item.kind === 'column') {
      out += 'c' + nameKey(item.name);
      if (item.alias !== undefined) out += 'a' + nameKey(item.alias);
      if (item.path !== undefined) out += 'p' + pathShape(item.path);
      if (item.key !== undefined) out += 'k' + nameKey(item.key);
      if (item.cast !== undefined) out += 't' + nameKey(item.cast);
      if (item.aggregate !== undefined) out += 'g' + item.aggregate;
      out += ',';
    } else {
      out += (item.spread ? 's' : 'e') + nameKey(item.relation);
      if (item.alias !== undefined) out += 'a' + nameKey(item.alias);
      if (item.hint !== undefined) out += 'h' + nameKey(item.hint);
      if (item.inner) out += 'i';
      out += '(' + selectShape(item.select) + '),';
    }
  }
  return out;
}

function filterShape(f: FilterNode): string {
  let out = (f.negated ? '!' : '') + f.op;
  if (f.path !== undefined) out = pathShape(f.path) + out;
  if ('quant' in f && f.quant !== undefined) out += '(' + f.quant + ')';
  if (f.op === 'is') out += '=' + f.value;
  else if (f.op === 'fts' || f.op === 'plfts' || f.op === 'phfts' || f.op === 'wfts') {
    if (f.langSlot !== null) out += '(L)';
  }
  return out + ' ' + nameKey(f.column);
}

function logicShape(n: LogicNode): string {
  let out = (n.negated ? '!' : '') + n.op + '(';
  for (const ch of n.children) out += (ch.kind === 'logic' ? logicShape(ch) : filterShape(ch)) + ',';
  return out + ')';
}

/**
 * A key equal for two parsed queries that differ only in bound values (including the
 * length of `in` lists, and limit/offset numbers). Equal shapes imply equal slot layouts,
 * so SQL generated for one can be reused with the other's `values`. The table, method,
 * role and Prefer count are not included: the planner adds what it depends on.
 */
export function shapeOf(parsed: ParsedQuery): string {
  let out = 'S' + selectShape(parsed.select) + '|F';
  for (const f of parsed.filters) out += filterShape(f) + ';';
  out += '|G';
  for (const g of parsed.logic) out += logicShape(g) + ';';
  out += '|O';
  for (const o of parsed.order) out += nameKey(o.column) + pathShape(o.path) + '.' + o.direction + '.' + (o.nulls ?? '') + ',';
  out += '|' + (parsed.limit === null ? '' : 'L') + (parsed.offset === null ? '' : 'O');
  if (parsed.embedded !== undefined) {
    // SUPABASE_COMPAT=true: each embedded level's filters, groups, order and page, in order.
    for (const e of parsed.embedded) {
      out += '|E' + e.path.map(nameKey).join('.') + ':';
      for (const f of e.filters) out += filterShape(f) + ';';
      out += 'G';
      for (const g of e.logic) out += logicShape(g) + ';';
      out += 'O';
      for (const o of e.order) out += nameKey(o.column) + pathShape(o.path) + '.' + o.direction + '.' + (o.nulls ?? '') + ',';
      out += (e.limit === null ? '' : 'L') + (e.offset === null ? '' : 'O');
    }
  }
  return out;
}
