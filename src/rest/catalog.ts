/**
 * The schema cache: what `rest_private.catalog()` reports about `public`, indexed for the
 * planner. One immutable `Catalog` per load; a reload builds a new one and swaps it in
 * (`RestArea.catalog`), so requests in flight keep the one they started with and never
 * wait. Each catalog carries its own cache of built statements (by request shape), which therefore can never
 * outlive the schema it was planned against.
 *
 * Names under `/rest/v1/` that are service routes (`batch`, `webhooks`, `rpc`, `rls-debug`)
 * win over tables of those names: such relations are left out here (docs/api/rest.md).
 */
import type { Sql } from '../core/db.ts';
import { ident } from './sql/fragments.ts';

export const RESERVED_NAMES: ReadonlySet<string> = new Set(['batch', 'webhooks', 'rpc', 'rls-debug']);

/** The type facts the planner (casts) and OpenAPI (JSON types) need. */
export interface TypeInfo {
  /** For people: `character varying(20)`, `integer[]`, `mood`. */
  readonly type: string;
  /** For casts: schema-qualified, quoted where needed, no typmod (`pg_catalog.int8`, `public."Mood"`). */
  readonly cast: string;
  /** typname of the domain's base type (or the type itself): `int4`, `_text`. */
  readonly base: string;
  /** pg_type.typcategory of the base type: `N`, `S`, `B`, `A` … */
  readonly category: string;
  /** Element typname when the base type is an array. */
  readonly elem: string | null;
}

export interface Column extends TypeInfo {
  readonly name: string;
  readonly nullable: boolean;
  readonly hasDefault: boolean;
  /** Generated (stored) or GENERATED ALWAYS identity: not writable. */
  readonly generated: boolean;
  readonly description: string | null;
  /** The default expression (SQL text from the catalog), or null; for `Prefer: missing=default`. */
  readonly default?: string | null;
  /** A computed field: the function (qualified name) that takes the row and yields the value. */
  readonly computed?: string;
}

export interface ForeignKey {
  readonly name: string;
  readonly from: string;
  readonly fromCols: readonly string[];
  readonly to: string;
  readonly toCols: readonly string[];
}

/** An embeddable relationship seen from one table. */
export interface Relationship {
  /**
   * many-to-one: this table holds the key → an object; one-to-many: the other does → an
   * array (an object when its key columns are unique: one-to-one); many-to-many: through a
   * junction table whose two foreign keys are part of its primary key → an array.
   */
  readonly cardinality: 'm2o' | 'o2m' | 'm2m';
  /** Embedded as an object (many-to-one, one-to-one). */
  readonly toOne: boolean;
  readonly target: Relation;
  /** [column of this table, column of the target] pairs; for m2m, of this table and the junction. */
  readonly pairs: readonly (readonly [string, string])[];
  /** The foreign key's name; for m2m, the junction's key to this table. */
  readonly constraint: string;
  /** m2m only: the junction and its [junction column, target column] pairs. */
  readonly junction?: { readonly rel: Relation; readonly constraint: string; readonly pairs: readonly (readonly [string, string])[] };
}

/** An enum type of `public` and its labels, in order. */
export interface EnumType {
  readonly name: string;
  readonly labels: readonly string[];
}

export interface Relation {
  readonly name: string;
  /** pg_class.relkind: r table, p partitioned, v view, m materialized view, f foreign table. */
  readonly kind: string;
  readonly insertable: boolean;
  readonly updatable: boolean;
  readonly deletable: boolean;
  readonly pk: readonly string[];
  /** Column sets (sorted) of unique indexes without predicate or expression, the pk included. */
  readonly uniques: readonly (readonly string[])[];
  readonly columns: ReadonlyMap<string, Column>;
  readonly columnList: readonly Column[];
  readonly description: string | null;
  /** `"public"."name"`, quoted once. */
  readonly qname: string;
  /** Foreign keys of this table (many-to-one) and pointing at it (one-to-many). */
  readonly outgoing: ForeignKey[];
  readonly incoming: ForeignKey[];
  /** Computed fields (REST_COMPUTED_FIELDS): functions of this table's row type, by name; empty when off. */
  readonly computed: Map<string, Column>;
}

export interface FuncArg extends TypeInfo {
  /** '' when unnamed. */
  readonly name: string;
  /** proargmodes: i in, o out, b inout, v variadic, t table column. */
  readonly mode: string;
  readonly hasDefault: boolean;
}

export interface Func {
  readonly oid: number;
  readonly name: string;
  readonly qname: string;
  /** Input arguments (modes i, b, v), in declaration order. */
  readonly inputs: readonly FuncArg[];
  /** Output columns (modes o, b, t), for OpenAPI. */
  readonly outputs: readonly FuncArg[];
  readonly returnsSet: boolean;
  readonly returnKind: 'void' | 'composite' | 'scalar';
  readonly returnType: TypeInfo;
  /** i immutable, s stable, v volatile. */
  readonly volatility: 'i' | 's' | 'v';
  readonly securityDefiner: boolean;
  readonly description: string | null;
}

interface RawType {
  type: string;
  cast: string;
  base: string;
  category: string;
  elem: string | null;
}
interface RawColumn extends RawType {
  name: string;
  nullable: boolean;
  has_default: boolean;
  generated: boolean;
  description: string | null;
  default?: string | null;
}
interface RawRelation {
  name: string;
  kind: string;
  insertable: boolean;
  updatable: boolean;
  deletable: boolean;
  pk: string[];
  uniques?: string[][];
  columns: RawColumn[];
  description: string | null;
}
interface RawForeignKey {
  name: string;
  from: string;
  from_cols: string[];
  to: string;
  to_cols: string[];
}
interface RawArg extends RawType {
  name: string;
  mode: string;
}
interface RawFunction {
  oid: number;
  name: string;
  args: RawArg[];
  defaults: number;
  returns_set: boolean;
  return_type: string;
  return_cast: string;
  return_kind: 'void' | 'composite' | 'scalar';
  return_base: string;
  return_category: string;
  return_elem: string | null;
  volatility: 'i' | 's' | 'v';
  security_definer: boolean;
  description: string | null;
}
export interface RawCatalog {
  relations: RawRelation[];
  foreign_keys: RawForeignKey[];
  functions: RawFunction[];
  enums?: { name: string; labels: string[] }[];
}

/** The compiled-SQL cache bound: shapes beyond it are compiled again (cheap) rather than kept. */
const SQL_CACHE_LIMIT = 5000;

export class Catalog {
  readonly relations: ReadonlyMap<string, Relation>;
  readonly functions: ReadonlyMap<string, readonly Func[]>;
  readonly enums: readonly EnumType[];
  readonly features: CatalogFeatures;
  /** When this catalog was loaded (ms since the epoch). */
  readonly loadedAt: number;
  private readonly sqlCache = new Map<string, unknown>();

  constructor(raw: RawCatalog, features: CatalogFeatures = NO_FEATURES) {
    this.loadedAt = Date.now();
    this.features = features;
    const relations = new Map<string, Relation>();
    for (const r of raw.relations) {
      if (RESERVED_NAMES.has(r.name)) continue;
      const columnList: Column[] = r.columns.map((c) => ({
        name: c.name,
        type: c.type,
        cast: c.cast,
        base: c.base,
        category: c.category,
        elem: c.elem,
        nullable: c.nullable,
        hasDefault: c.has_default,
        generated: c.generated,
        description: c.description,
        default: c.default ?? null,
      }));
      relations.set(r.name, {
        name: r.name,
        kind: r.kind,
        insertable: r.insertable,
        updatable: r.updatable,
        deletable: r.deletable,
        pk: r.pk,
        uniques: (r.uniques ?? []).map((u) => [...u].sort()),
        columns: new Map(columnList.map((c) => [c.name, c])),
        columnList,
        description: r.description,
        qname: 'public.' + ident(r.name),
        outgoing: [],
        incoming: [],
        computed: new Map(),
      });
    }
    for (const f of raw.foreign_keys) {
      const fk: ForeignKey = { name: f.name, from: f.from, fromCols: f.from_cols, to: f.to, toCols: f.to_cols };
      relations.get(f.from)?.outgoing.push(fk);
      relations.get(f.to)?.incoming.push(fk);
    }
    this.relations = relations;

    const functions = new Map<string, Func[]>();
    for (const f of raw.functions) {
      const inputs: FuncArg[] = [];
      const outputs: FuncArg[] = [];
      const nIn = f.args.filter((a) => a.mode === 'i' || a.mode === 'b' || a.mode === 'v').length;
      for (const a of f.args) {
        const isIn = a.mode === 'i' || a.mode === 'b' || a.mode === 'v';
        const arg: FuncArg = {
          name: a.name,
          mode: a.mode,
          type: a.type,
          cast: a.cast,
          base: a.base,
          category: a.category,
          elem: a.elem,
          hasDefault: isIn && inputs.length >= nIn - f.defaults,
        };
        if (isIn) inputs.push(arg);
        if (a.mode !== 'i' && a.mode !== 'v') outputs.push(arg);
      }
      const fn: Func = {
        oid: Number(f.oid),
        name: f.name,
        qname: 'public.' + ident(f.name),
        inputs,
        outputs,
        returnsSet: f.returns_set,
        returnKind: f.return_kind,
        returnType: { type: f.return_type, cast: f.return_cast, base: f.return_base, category: f.return_category, elem: f.return_elem },
        volatility: f.volatility,
        securityDefiner: f.security_definer,
        description: f.description,
      };
      let list = functions.get(f.name);
      if (!list) functions.set(f.name, (list = []));
      list.push(fn);
    }
    this.functions = functions;
    this.enums = raw.enums ?? [];
    if (features.computedFields) for (const list of functions.values()) for (const fn of list) addComputed(relations, fn);
  }

  /**
   * Relationships from `from` to the table named `name`: its foreign keys to that table
   * (many-to-one) and that table's foreign keys to it (one-to-many). A self-reference
   * yields both.
   */
  relationships(from: Relation, name: string): Relationship[] {
    const target = this.relations.get(name);
    if (!target) return [];
    const out: Relationship[] = [];
    for (const fk of from.outgoing) {
      if (fk.to === name) {
        out.push({ cardinality: 'm2o', toOne: true, target, constraint: fk.name, pairs: fk.fromCols.map((c, i) => [c, fk.toCols[i]] as const) });
      }
    }
    for (const fk of from.incoming) {
      if (fk.from === name) {
        const toOne = isUnique(target, fk.fromCols);
        out.push({ cardinality: 'o2m', toOne, target, constraint: fk.name, pairs: fk.toCols.map((c, i) => [c, fk.fromCols[i]] as const) });
      }
    }
    // Many-to-many: a junction J with a key to `from` and one to `target`, both inside J's pk.
    for (const fk of from.incoming) {
      const j = this.relations.get(fk.from);
      if (j === undefined || !inPk(j, fk.fromCols)) continue;
      for (const other of j.outgoing) {
        if (other === fk || other.to !== name || !inPk(j, other.fromCols)) continue;
        out.push({
          cardinality: 'm2m',
          toOne: false,
          target,
          constraint: fk.name,
          pairs: fk.toCols.map((c, i) => [c, fk.fromCols[i]] as const),
          junction: { rel: j, constraint: other.name, pairs: other.fromCols.map((c, i) => [c, other.toCols[i]] as const) },
        });
      }
    }
    return out;
  }

  /** Compiled SQL for a shape key, or undefined. */
  cached<T>(key: string): T | undefined {
    return this.sqlCache.get(key) as T | undefined;
  }

  remember<T>(key: string, value: T): T {
    if (this.sqlCache.size >= SQL_CACHE_LIMIT) this.sqlCache.clear();
    this.sqlCache.set(key, value);
    return value;
  }
}

/**
 * A computed field (PostgREST): a function of `public` whose first argument is a table's row
 * type, every other argument defaulted, returning one value (not a set, not void). It is a
 * column of that table for `select`, filters and `order`, never for writes; a real column of
 * that name wins, and two such functions of one name for one table are neither.
 */
function addComputed(relations: ReadonlyMap<string, Relation>, fn: Func): void {
  if (fn.returnsSet || fn.returnKind === 'void' || fn.inputs.length === 0) return;
  const arg = fn.inputs[0];
  if (arg.mode !== 'i' || arg.category !== 'C' || !arg.cast.startsWith('public.')) return;
  if (fn.inputs.some((a, i) => i > 0 && !a.hasDefault)) return;
  const rel = relations.get(arg.base);
  if (rel === undefined || rel.columns.has(fn.name)) return;
  if (rel.computed.has(fn.name)) {
    rel.computed.set(fn.name, AMBIGUOUS);
    return;
  }
  rel.computed.set(fn.name, {
    name: fn.name,
    ...fn.returnType,
    nullable: true,
    hasDefault: false,
    generated: true,
    description: fn.description,
    computed: fn.qname,
  });
}

/** Marks a computed-field name that two functions claim: it resolves to nothing. */
const AMBIGUOUS: Column = Object.freeze({ name: '', type: '', cast: '', base: '', category: '', elem: null, nullable: true, hasDefault: false, generated: true, description: null });

/** Opt-in parts of the catalog (settings, docs/api/rest.md#opt-in-features). */
export interface CatalogFeatures {
  readonly computedFields: boolean;
  /** `count()`, `col.sum()` … in `select` (REST_AGGREGATES_ENABLED). */
  readonly aggregates: boolean;
}
const NO_FEATURES: CatalogFeatures = { computedFields: false, aggregates: false };

function inPk(rel: Relation, cols: readonly string[]): boolean {
  return rel.pk.length > 0 && cols.every((c) => rel.pk.includes(c));
}

/** The columns, as a set, are those of a unique index (or the pk) of `rel`. */
export function isUnique(rel: Relation, cols: readonly string[]): boolean {
  const sorted = [...cols].sort();
  return rel.uniques.some((u) => u.length === sorted.length && u.every((c, i) => c === sorted[i]));
}

/** One round trip: the whole catalog as JSON, parsed once per load. */
export async function loadCatalog(sql: Sql, features: CatalogFeatures = NO_FEATURES): Promise<Catalog> {
  const [row] = await sql<{ catalog: RawCatalog }[]>`select rest_private.catalog() as catalog`;
  return new Catalog(row.catalog, features);
}
