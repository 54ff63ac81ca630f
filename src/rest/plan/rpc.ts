/**
 * The planner's reading of a function: overloads resolved by the names of the arguments
 * given (docs/api/rest.md, RPC), the columns of a set-returning function's result as a
 * relation the query string can shape, and the call as the plan tree holds it.
 */
import { ERRORS } from '../../core/errors.ts';
import type { Catalog, Column, Func, Relation } from '../catalog.ts';
import { ident } from '../sql/fragments.ts';
import { REST_ERRORS } from '../errors.ts';
import type { CallArg, CallPlan } from './tree.ts';

/**
 * The columns of a set-returning function's result, as a relation the query string can
 * filter, select and order: the table when it returns `setof` a table of `public` (embeds
 * then work as on the table), else its `returns table (…)` or OUT columns. null: a function
 * whose result has no columns to address (a scalar, void, a single row).
 */
export function resultRelation(cat: Catalog, fn: Func): Relation | null {
  if (!fn.returnsSet || fn.returnKind !== 'composite') return null;
  const known = results.get(fn);
  if (known !== undefined) return known;
  let rel: Relation | null = null;
  const t = fn.returnType;
  if (t.cast.startsWith('public.')) rel = cat.relations.get(t.base) ?? null;
  if (rel === null && fn.outputs.length > 0) {
    const columnList: Column[] = fn.outputs.map((a) => ({
      name: a.name,
      type: a.type,
      cast: a.cast,
      base: a.base,
      category: a.category,
      elem: a.elem,
      nullable: true,
      hasDefault: false,
      generated: true,
      description: null,
    }));
    rel = {
      name: fn.name,
      kind: 'f',
      insertable: false,
      updatable: false,
      deletable: false,
      pk: [],
      uniques: [],
      columns: new Map(columnList.map((c) => [c.name, c])),
      columnList,
      description: null,
      qname: fn.qname,
      outgoing: [],
      incoming: [],
      computed: new Map(),
    };
  }
  results.set(fn, rel);
  return rel;
}
const results = new WeakMap<Func, Relation | null>();

/** The names any function of that name takes: on GET, these parameters are arguments. */
export function argumentNames(cat: Catalog, name: string): ReadonlySet<string> {
  const set = new Set<string>();
  for (const fn of cat.functions.get(name) ?? []) for (const a of fn.inputs) if (a.name !== '') set.add(a.name);
  return set;
}

/** Whether some function of that name has a result the query string can shape. */
export function hasResultColumns(cat: Catalog, name: string): boolean {
  return (cat.functions.get(name) ?? []).some((fn) => resultRelation(cat, fn) !== null);
}

/**
 * Resolve by name and the set of argument names given (docs/api/rest.md): a candidate takes
 * every given name and is given every input without a default. None with that name in
 * public → 404 `function not found`; no candidate or several → 400 `invalid request`.
 * A function whose only input is an unnamed json/jsonb argument takes the whole POST body.
 */
export function resolveFunction(cat: Catalog, name: string, given: readonly string[], post: boolean): { fn: Func; wholeBody: boolean } {
  const overloads = cat.functions.get(name);
  if (overloads === undefined) throw REST_ERRORS.functionNotFound(name);
  const givenSet = new Set(given);
  const matches: Func[] = [];
  for (const fn of overloads) {
    let ok = true;
    let named = 0;
    for (const a of fn.inputs) {
      if (a.name !== '' && givenSet.has(a.name)) named++;
      else if (!a.hasDefault) ok = false;
    }
    if (ok && named === givenSet.size) matches.push(fn);
  }
  if (matches.length === 1) return { fn: matches[0], wholeBody: false };
  if (matches.length === 0 && post) {
    const raw = overloads.filter(
      (fn) => fn.inputs.length === 1 && fn.inputs[0].name === '' && (fn.inputs[0].base === 'json' || fn.inputs[0].base === 'jsonb'),
    );
    if (raw.length === 1) return { fn: raw[0], wholeBody: true };
  }
  throw ERRORS.invalidRequest();
}

export function maxAgeOf(fn: Pick<Func, 'volatility'>): number | null {
  return fn.volatility === 's' ? 60 : fn.volatility === 'i' ? 3600 : null;
}

function callArgs(fn: Func, names: readonly string[]): CallArg[] {
  return names.map((n) => {
    const a = fn.inputs.find((x) => x.name === n)!;
    return { name: a.name, cast: a.cast, variadic: a.mode === 'v' };
  });
}

/** A POST call: its arguments from the JSON body at `$param` (the whole body, or its keys `names`). */
export function postCall(fn: Func, wholeBody: boolean, names: readonly string[], param: number): CallPlan {
  const base = { qname: fn.qname, returnsSet: fn.returnsSet, returnKind: fn.returnKind, maxAge: maxAgeOf(fn) };
  if (wholeBody) return { ...base, args: { kind: 'whole', cast: fn.inputs[0].cast, param } };
  if (names.length === 0) return { ...base, args: { kind: 'none' } };
  return { ...base, args: { kind: 'record', args: callArgs(fn, names), param } };
}

/** A GET call: its arguments text parameters from `$first` on, in `names` order. */
export function getCall(fn: Func, names: readonly string[], first: number): CallPlan {
  return { qname: fn.qname, returnsSet: fn.returnsSet, returnKind: fn.returnKind, maxAge: maxAgeOf(fn), args: { kind: 'params', args: callArgs(fn, names), first } };
}

/**
 * An edge function in plv8: `public.<name>(jsonb)` called with the request's payload as `$1`,
 * its answer shaped as RPC shapes it.
 */
export function jsonCall(name: string, fn: Pick<Func, 'returnsSet' | 'returnKind' | 'volatility'>): CallPlan {
  return {
    qname: `"public".${ident(name)}`,
    returnsSet: fn.returnsSet,
    returnKind: fn.returnKind,
    maxAge: maxAgeOf(fn),
    args: { kind: 'whole', cast: 'jsonb', param: 1 },
  };
}
