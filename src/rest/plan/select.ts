/**
 * The planner's reading of a relation: a select list, filters and order terms resolved
 * against the catalog (columns, computed fields, embeds' relationships, output names) into
 * the plan tree's `ReadNode`, `Condition` and `OrderTerm`. Every refusal a name can earn
 * (unknown column, embed not found or ambiguous, duplicate output name, a JSON path into a
 * column that is not JSON, aggregates where they cannot be) is raised here, before any SQL.
 */
import { ERRORS } from '../../core/errors.ts';
import type { Catalog, Column, Relation, Relationship } from '../catalog.ts';
import { CASTS, type EmbedItem, type EmbeddedQuery, type FilterNode, type JsonStep, type LogicNode, type ParsedQuery, type SelectItem, type SelectNode } from '../grammar.ts';
import { REST_ERRORS, type Candidate } from '../errors.ts';
import type { ColumnRef, Condition, EmbedPlan, Operand, OrderTerm, ReadNode, SelectPlan } from './tree.ts';

export function column(rel: Relation, name: string): Column {
  const col = rel.columns.get(name) ?? rel.computed.get(name);
  if (col === undefined || col.name === '') throw REST_ERRORS.unknownColumn(name, rel.name);
  return col;
}

function ref(col: Column): ColumnRef {
  return col.computed === undefined ? { name: col.name } : { name: col.name, computed: col.computed };
}

function isJson(col: Column): boolean {
  return col.base === 'json' || col.base === 'jsonb';
}

/** A column, or a JSON path into one (`->>` compares as text, `->` as jsonb: json has no equality). */
function operand(rel: Relation, name: string, path: readonly JsonStep[] | undefined): Operand {
  const col = column(rel, name);
  if (path === undefined) return { column: ref(col), cast: col.cast, base: col.base };
  if (!isJson(col)) throw ERRORS.invalidRequest();
  if (path[path.length - 1].arrow === '->>') return { column: ref(col), path, cast: 'pg_catalog.text', base: 'text' };
  return { column: ref(col), path, cast: 'pg_catalog.jsonb', base: 'jsonb' };
}

function filterCondition(rel: Relation, f: FilterNode): Condition {
  return { kind: 'filter', on: operand(rel, f.column, f.path), filter: f };
}

function logicCondition(rel: Relation, g: LogicNode): Condition {
  const children = g.children.map((ch) => (ch.kind === 'logic' ? logicCondition(rel, ch) : filterCondition(rel, ch)));
  return { kind: 'logic', op: g.op, negated: g.negated, children };
}

/** The query's (or an embedded level's) filters and groups on `rel`, all ANDed. */
export function conditions(rel: Relation, q: Pick<ParsedQuery, 'filters' | 'logic'>): Condition[] {
  const out: Condition[] = [];
  for (const f of q.filters) out.push(filterCondition(rel, f));
  for (const g of q.logic) out.push(logicCondition(rel, g));
  return out;
}

export function orderTerms(rel: Relation, q: Pick<ParsedQuery, 'order'>): OrderTerm[] {
  return q.order.map((o) => ({ on: operand(rel, o.column, o.path), direction: o.direction, nulls: o.nulls }));
}

/**
 * The items of one select level, each output name once. Two items with one output name would
 * give a JSON object with that key twice (parsers keep the last): refused, as PostgREST does;
 * aliases tell them apart. A plain column written again exactly as before (`id,id`) has the
 * same value: it is selected once, as PostgREST answers it.
 */
export function outputItems(node: SelectNode): readonly SelectItem[] {
  if (node.items.length < 2) return node.items;
  const seen = new Map<string, SelectItem>();
  let repeated = false;
  for (const item of node.items) {
    // `*` and spreads are checked apart (checkSpreadNames); an empty embed adds no key.
    if (item.kind === 'star' || (item.kind === 'embed' && (item.spread || item.select.items.length === 0))) continue;
    const name =
      item.kind === 'column' ? (item.alias ?? (item.aggregate !== undefined ? item.aggregate : (item.key ?? item.name))) : (item.alias ?? item.relation);
    const before = seen.get(name);
    if (before === undefined) seen.set(name, item);
    else if (item.kind === 'column' && item.aggregate === undefined && JSON.stringify(item) === JSON.stringify(before)) repeated = true;
    else throw REST_ERRORS.duplicateName(name);
  }
  if (!repeated) return node.items;
  const kept: SelectItem[] = [];
  for (const item of node.items) {
    if (item.kind !== 'column' || !kept.some((k) => JSON.stringify(k) === JSON.stringify(item))) kept.push(item);
  }
  return kept;
}

/** The names spreads bring into a level must not meet each other or the level's own items. */
export function checkSpreadNames(node: SelectNode, spread: readonly string[]): void {
  const seen = new Set<string>();
  for (const item of node.items) {
    if (item.kind === 'column') seen.add(item.alias ?? (item.aggregate !== undefined ? item.aggregate : (item.key ?? item.name)));
    else if (item.kind === 'embed' && !item.spread && item.select.items.length > 0) seen.add(item.alias ?? item.relation);
  }
  for (const name of spread) {
    if (seen.has(name)) throw REST_ERRORS.duplicateName(name);
    seen.add(name);
  }
}

/**
 * An embed named by a foreign key instead of a table (PostgREST): this table's key by its
 * name or its one column (`parent_id(*)`: the parent), or another table's key to this one by
 * its name.
 */
function byKeyName(cat: Catalog, rel: Relation, name: string): Relationship[] {
  const out: Relationship[] = [];
  for (const fk of rel.outgoing) {
    if (fk.name === name || (fk.fromCols.length === 1 && fk.fromCols[0] === name)) {
      for (const r of cat.relationships(rel, fk.to)) if (r.cardinality === 'm2o' && r.constraint === fk.name) out.push(r);
    }
  }
  for (const fk of rel.incoming) {
    if (fk.name === name) {
      for (const r of cat.relationships(rel, fk.from)) if (r.cardinality === 'o2m' && r.constraint === fk.name) out.push(r);
    }
  }
  return out;
}

const CARDINALITY = { m2o: 'many-to-one', o2m: 'one-to-many', m2m: 'many-to-many' } as const;

/** A relationship as PostgREST's PGRST201 details describe it (the schema's names only, no data). */
function candidate(rel: Relation, r: Relationship): Candidate {
  const cols = (pairs: readonly (readonly [string, string])[], i: 0 | 1) => pairs.map((p) => p[i]).join(', ');
  const cardinality = r.cardinality === 'o2m' && r.toOne ? 'one-to-one' : CARDINALITY[r.cardinality];
  const relationship =
    r.junction === undefined
      ? `${r.constraint} using ${rel.name}(${cols(r.pairs, 0)}) and ${r.target.name}(${cols(r.pairs, 1)})`
      : `${r.junction.rel.name} using ${r.constraint}(${cols(r.pairs, 1)}) and ${r.junction.constraint}(${cols(r.junction.pairs, 0)})`;
  return { cardinality, embedding: `${rel.name} with ${r.target.name}`, relationship };
}

/** The hint that names a relationship in the ambiguity message: its key, or its junction. */
function hintOf(r: Relationship): string {
  return r.junction === undefined ? r.constraint : r.junction.rel.name;
}

/**
 * Picks the relationship an embed means. A hint keeps those whose foreign key has that name,
 * whose key columns include it, or (many-to-many) whose junction has that name or whose
 * junction key to this table does. A self-reference gives the same key both ways: the
 * children (one-to-many), or the parent (many-to-one) when the hint names a column. None:
 * `invalid embed in request`; several: the message names the hints.
 */
export function resolveEmbed(cat: Catalog, rel: Relation, item: EmbedItem): Relationship {
  let found = cat.relationships(rel, item.relation);
  if (found.length === 0) found = byKeyName(cat, rel, item.relation);
  const hint = item.hint;
  let byColumn = false;
  if (hint !== undefined) {
    found = found.filter((r) => {
      if (r.junction !== undefined) return r.junction.rel.name === hint || r.constraint === hint;
      if (r.constraint === hint) return true;
      const col = r.pairs.some(([mine, theirs]) => (r.cardinality === 'm2o' ? mine : theirs) === hint);
      if (col) byColumn = true;
      return col;
    });
  }
  if (found.length === 2 && found[0].constraint === found[1].constraint && found[0].target === rel && found[0].junction === undefined && found[1].junction === undefined) {
    // Self-reference: m2o and o2m over one key.
    const want = byColumn ? 'm2o' : 'o2m';
    found = found.filter((r) => r.cardinality === want);
  }
  if (found.length === 1) return found[0];
  if (found.length === 0) throw REST_ERRORS.invalidEmbed(rel.name, item.relation);
  let hints = [...new Set(found.map((r) => item.relation + '!' + hintOf(r)))];
  // Two ways through one junction (a self many-to-many): its keys tell them apart.
  if (hints.length < found.length) hints = [...new Set(found.map((r) => item.relation + '!' + r.constraint))];
  hints.sort();
  throw REST_ERRORS.ambiguousEmbed(rel.name, item.relation, hints, found.map((r) => candidate(rel, r)).sort((x, y) => (x.relationship < y.relationship ? -1 : 1)));
}

/**
 * SUPABASE_COMPAT=true: the embedded levels' filters, order and paging of a query, matched to
 * its embeds by path (each embed's alias, or relation name) while its select list is planned.
 */
export interface EmbedScope {
  readonly queries: readonly EmbeddedQuery[];
  readonly path: readonly string[];
  readonly used: Set<EmbeddedQuery>;
}

/** The scope of a query's embedded levels; undefined when it has none. */
export function embedScope(q: ParsedQuery): EmbedScope | undefined {
  return q.embedded === undefined || q.embedded.length === 0 ? undefined : { queries: q.embedded, path: [], used: new Set() };
}

/** Every embedded level named must be one of the query's embeds (PostgREST: not an embedded resource in this request). */
export function checkScope(scope: EmbedScope | undefined): void {
  if (scope !== undefined && scope.used.size < scope.queries.length) throw REST_ERRORS.invalidEmbed();
}

/** The embedded level at `path` of the scope, its conditions, order and page; none: empty. */
function levelOf(rel: Relation, scope: EmbedScope | undefined, path: readonly string[]): Pick<ReadNode, 'where' | 'order' | 'limit' | 'offset'> {
  const eq = scope?.queries.find((e) => e.path.length === path.length && e.path.every((n, i) => n === path[i]));
  if (eq === undefined) return { where: [], order: [], limit: null, offset: null };
  scope!.used.add(eq);
  return { where: conditions(rel, eq), order: orderTerms(rel, eq), limit: eq.limit === null ? null : eq.limit + 1, offset: eq.offset === null ? null : eq.offset + 1 };
}

/** A level with nothing but its select list (an embed's, a write's answer), and (compat) an embed's own conditions, order and page. */
export function readNode(cat: Catalog, rel: Relation, select: SelectNode, scope?: EmbedScope): ReadNode {
  const { items, names, grouped } = selectList(cat, rel, select, scope);
  const level = scope === undefined || scope.path.length === 0 ? { where: [], order: [], limit: null, offset: null } : levelOf(rel, scope, scope.path);
  return { qname: rel.qname, select: items, names, grouped, ...level };
}

/**
 * The select list of one level. A level with an aggregate groups by its plain columns; `*`
 * and embeds that add a key cannot be grouped and are refused there (a to-one spread's
 * columns are plain columns of the level: grouped by like them).
 */
export function selectList(cat: Catalog, rel: Relation, node: SelectNode, scope?: EmbedScope): { items: SelectPlan[]; names: string[]; grouped: boolean } {
  const items = outputItems(node);
  const grouped = items.some((i) => i.kind === 'column' && i.aggregate !== undefined);
  if (grouped && !cat.features.aggregates) throw REST_ERRORS.aggregatesOff();
  const out: SelectPlan[] = [];
  const names: string[] = [];
  const spreadNames: string[] = [];
  for (const item of items) {
    let embed: Relationship | null = null;
    const groupedSpread = grouped && item.kind === 'embed' && item.spread === true && (embed = resolveEmbed(cat, rel, item)).toOne;
    if (grouped && !groupedSpread && (item.kind === 'star' || (item.kind === 'embed' && item.select.items.length > 0))) throw ERRORS.invalidRequest();
    const one = item.kind === 'embed' ? embedPlan(cat, item, embed ?? resolveEmbed(cat, rel, item), scope) : selectItem(rel, item);
    out.push(one);
    if (one.kind === 'star') names.push(...rel.columnList.map((c) => c.name));
    else if (one.kind !== 'embed') names.push(one.output);
    else if (one.empty) continue;
    else if (one.spread) {
      spreadNames.push(...one.node.names);
      names.push(...one.node.names);
    } else names.push(one.output);
  }
  if (spreadNames.length > 0) checkSpreadNames(node, spreadNames);
  return { items: out, names, grouped };
}

function selectItem(rel: Relation, item: Exclude<SelectItem, EmbedItem>): SelectPlan {
  if (item.kind === 'star') return { kind: 'star' };
  const cast = item.cast === undefined ? undefined : CASTS[item.cast];
  if (item.aggregate !== undefined) {
    // `count()` counts the group's rows; `col.sum()` … aggregates a column (or a JSON path into one).
    let arg: { column: ColumnRef; path?: readonly JsonStep[] } | null = null;
    if (item.name !== '*') {
      const col = column(rel, item.name);
      if (item.path !== undefined && !isJson(col)) throw ERRORS.invalidRequest();
      arg = item.path === undefined ? { column: ref(col) } : { column: ref(col), path: item.path };
    }
    return { kind: 'aggregate', aggregate: item.aggregate, arg, output: item.alias ?? item.aggregate, ...(cast === undefined ? {} : { cast }) };
  }
  const col = column(rel, item.name);
  const bare = item.alias === undefined && item.path === undefined && item.cast === undefined;
  if (item.path !== undefined && !isJson(col)) throw ERRORS.invalidRequest();
  return {
    kind: 'column',
    column: ref(col),
    output: item.alias ?? item.key ?? col.name,
    bare,
    ...(item.path === undefined ? {} : { path: item.path }),
    ...(cast === undefined ? {} : { cast }),
  };
}

/** An embed: one relationship between the two relations (docs/api/rest.md), picked by the hint when there are several. */
function embedPlan(cat: Catalog, item: EmbedItem, r: Relationship, scope: EmbedScope | undefined): EmbedPlan {
  const empty = item.select.items.length === 0;
  const inner = scope === undefined ? undefined : { ...scope, path: [...scope.path, item.alias ?? item.relation] };
  const node: ReadNode = empty
    ? { qname: r.target.qname, select: [], names: [], grouped: false, ...levelOf(r.target, inner, inner?.path ?? []) }
    : readNode(cat, r.target, item.select, inner);
  const join = r.junction === undefined ? { pairs: r.pairs } : { pairs: r.pairs, junction: { qname: r.junction.rel.qname, pairs: r.junction.pairs } };
  return { kind: 'embed', output: item.alias ?? item.relation, toOne: r.toOne, spread: item.spread === true, inner: item.inner === true, empty, join, node };
}
