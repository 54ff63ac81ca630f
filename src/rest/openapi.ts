/**
 * GET /rest/v1/: an OpenAPI 2.0 (Swagger) description of what the calling role can reach
 * (docs/api/rest.md): the tables and views of `public` on which it holds a privilege, with
 * only the methods its privileges allow, their columns and types, and the functions it
 * may EXECUTE. The schema comes from the catalog; the privileges from one query run as the
 * caller (they depend on the role and change with GRANT). Not a hot path.
 */
import type { LaneQuery, LaneSql } from '../core/db.ts';
import type { Catalog, Column, Func, Relation, TypeInfo } from './catalog.ts';

export interface Reachable {
  rels: { name: string; s: boolean; i: boolean; u: boolean; d: boolean }[];
  funcs: number[];
}

/** Run as the caller (inside withContext): what it may do in `public`, as JSON text (`rels`, `funcs`). */
export const reachableQuery = (c: LaneSql): LaneQuery => c`
  select coalesce((
           select json_agg(json_build_object(
                    'name', c.relname,
                    's', has_any_column_privilege(c.oid, 'SELECT'),
                    'i', has_any_column_privilege(c.oid, 'INSERT'),
                    'u', has_any_column_privilege(c.oid, 'UPDATE'),
                    'd', has_table_privilege(c.oid, 'DELETE')))
             from pg_catalog.pg_class c
            where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'v', 'm', 'f', 'p')), '[]')::text as rels,
         coalesce((
           select json_agg(p.oid::int8)
             from pg_catalog.pg_proc p
            where p.pronamespace = 'public'::regnamespace and p.prokind = 'f'
              and has_function_privilege(p.oid, 'EXECUTE')), '[]')::text as funcs`;

type Schema = Record<string, unknown>;

const INTEGER = new Set(['int2', 'int4', 'int8', 'oid']);
const NUMBER = new Set(['float4', 'float8', 'numeric', 'money']);

function scalarSchema(base: string, category: string, format: string): Schema {
  if (INTEGER.has(base)) return { type: 'integer', format };
  if (NUMBER.has(base)) return { type: 'number', format };
  if (base === 'bool') return { type: 'boolean', format };
  if (base === 'json' || base === 'jsonb') return { format };
  if (category === 'A') return { type: 'array', format, items: {} };
  return { type: 'string', format };
}

/** JSON Schema (Swagger 2.0 subset) of a PostgreSQL type. */
export function typeSchema(t: TypeInfo): Schema {
  if (t.category === 'A' && t.elem !== null) {
    const elem = t.elem;
    return { type: 'array', format: t.type, items: scalarSchema(elem, INTEGER.has(elem) ? 'N' : 'S', elem) };
  }
  return scalarSchema(t.base, t.category, t.type);
}

function columnSchema(rel: Relation, c: Column): Schema {
  const s = typeSchema(c);
  let description = c.description ?? '';
  if (rel.pk.includes(c.name)) description += (description ? '\n\n' : '') + 'Note:\nThis is a Primary Key.<pk/>';
  for (const fk of rel.outgoing) {
    const i = fk.fromCols.indexOf(c.name);
    if (i >= 0) description += (description ? '\n\n' : '') + `Note:\nThis is a Foreign Key to \`${fk.to}.${fk.toCols[i]}\`.<fk table='${fk.to}' column='${fk.toCols[i]}'/>`;
  }
  if (description) s.description = description;
  return s;
}

/** A JSON pointer to a definition, escaped for the pointer and the URI fragment. */
function definitionRef(name: string): string {
  return '#/definitions/' + encodeURIComponent(name.replaceAll('~', '~0').replaceAll('/', '~1'));
}

const SHARED_PARAMETERS: Record<string, Schema> = {
  select: { name: 'select', in: 'query', required: false, type: 'string', description: 'Columns and embedded relations, e.g. `id,author(name)`.' },
  order: { name: 'order', in: 'query', required: false, type: 'string', description: '`col.asc|desc[.nullsfirst|.nullslast]`, comma-separated.' },
  limit: { name: 'limit', in: 'query', required: false, type: 'integer', minimum: 0, description: 'Maximum rows.' },
  offset: { name: 'offset', in: 'query', required: false, type: 'integer', minimum: 0, description: 'Rows to skip.' },
  or: { name: 'or', in: 'query', required: false, type: 'string', description: 'Logical group: `(col.op.val,…)`.' },
  and: { name: 'and', in: 'query', required: false, type: 'string', description: 'Logical group: `(col.op.val,…)`.' },
  preferReturn: { name: 'Prefer', in: 'header', required: false, type: 'string', enum: ['return=representation', 'return=minimal'] },
  preferCount: { name: 'Prefer', in: 'header', required: false, type: 'string', enum: ['count=exact', 'count=planned', 'count=estimated'] },
};

function ref(name: string): Schema {
  return { $ref: `#/parameters/${name}` };
}

/** Query parameters with these names are the grammar's, so no column filter is listed under them. */
const RESERVED_QUERY = new Set(['select', 'order', 'limit', 'offset', 'or', 'and', 'not.or', 'not.and', 'on_conflict', 'columns']);

function tablePaths(rel: Relation, r: Reachable['rels'][number]): Schema {
  const filters = rel.columnList.filter((c) => !RESERVED_QUERY.has(c.name)).map((c) => ({
    name: c.name,
    in: 'query',
    required: false,
    type: 'string',
    format: c.type,
    description: 'Filter: `op.value` (eq, neq, gt, gte, lt, lte, like, ilike, is, in, cs, cd, ov, fts, sl, sr, nxl, nxr, adj; `not.` negates).',
  }));
  const item = { $ref: definitionRef(rel.name) };
  const body = {
    name: 'body',
    in: 'body',
    required: true,
    schema: { $ref: definitionRef(rel.name) },
  };
  const ops: Schema = {};
  const tag = [rel.name];
  if (r.s) {
    ops.get = {
      tags: tag,
      summary: rel.description ?? undefined,
      parameters: [...filters, ref('select'), ref('order'), ref('limit'), ref('offset'), ref('or'), ref('and'), ref('preferCount')],
      responses: { '200': { description: 'OK', schema: { type: 'array', items: item } } },
    };
  }
  if (r.i && rel.insertable) {
    ops.post = {
      tags: tag,
      parameters: [{ ...body, schema: { $ref: definitionRef(rel.name) } }, ref('select'), ref('preferReturn')],
      responses: { '201': { description: 'Created', schema: { type: 'array', items: item } } },
    };
  }
  if (r.u && rel.updatable) {
    ops.patch = {
      tags: tag,
      parameters: [...filters, body, ref('select'), ref('or'), ref('and'), ref('preferReturn')],
      responses: { '200': { description: 'OK', schema: { type: 'array', items: item } }, '204': { description: 'No Content' } },
    };
  }
  if (r.d && rel.deletable) {
    ops.delete = {
      tags: tag,
      parameters: [...filters, ref('select'), ref('or'), ref('and'), ref('preferReturn')],
      responses: { '200': { description: 'OK', schema: { type: 'array', items: item } }, '204': { description: 'No Content' } },
    };
  }
  return ops;
}

function definition(rel: Relation): Schema {
  const properties: Record<string, Schema> = {};
  const required: string[] = [];
  for (const c of rel.columnList) {
    properties[c.name] = columnSchema(rel, c);
    if (!c.nullable && !c.hasDefault) required.push(c.name);
  }
  const d: Schema = { type: 'object', properties };
  if (required.length > 0) d.required = required;
  if (rel.description) d.description = rel.description;
  return d;
}

function returnSchema(fn: Func): Schema {
  if (fn.returnKind === 'void') return {};
  const one: Schema = fn.returnKind === 'composite' ? { type: 'object' } : typeSchema(fn.returnType);
  return fn.returnsSet ? { type: 'array', items: one } : one;
}

function rpcPath(fns: readonly Func[]): Schema {
  // Overloads share a path: their named inputs are merged; required only when one function.
  const properties: Record<string, Schema> = {};
  const required = new Set<string>();
  for (const fn of fns) {
    for (const a of fn.inputs) {
      if (a.name === '') continue;
      properties[a.name] ??= { ...typeSchema(a), format: a.type };
      if (fns.length === 1 && !a.hasDefault) required.add(a.name);
    }
  }
  const schema: Schema = { type: 'object', properties };
  if (required.size > 0) schema.required = [...required];
  const description = fns.map((f) => f.description).find((d) => d) ?? undefined;
  const response = { '200': { description: 'OK', schema: fns.length === 1 ? returnSchema(fns[0]) : {} } };
  const query = Object.entries(properties).map(([name, s]) => ({
    name,
    in: 'query',
    required: required.has(name),
    type: typeof s.type === 'string' && s.type !== 'array' && s.type !== 'object' ? s.type : 'string',
    format: s.format,
  }));
  return {
    post: { tags: ['(rpc) ' + fns[0].name], summary: description, parameters: [{ name: 'args', in: 'body', required: true, schema }], responses: response },
    get: { tags: ['(rpc) ' + fns[0].name], summary: description, parameters: query, responses: response },
  };
}

export function buildOpenApi(cat: Catalog, reach: Reachable, opts: { host?: string; scheme: string }): Schema {
  const paths: Record<string, Schema> = {
    '/': {
      get: {
        tags: ['Introspection'],
        summary: 'OpenAPI description (this document)',
        produces: ['application/openapi+json', 'application/json'],
        responses: { '200': { description: 'OK' } },
      },
    },
  };
  const definitions: Record<string, Schema> = {};
  for (const r of reach.rels) {
    const rel = cat.relations.get(r.name);
    if (rel === undefined || !(r.s || r.i || r.u || r.d)) continue;
    const ops = tablePaths(rel, r);
    if (Object.keys(ops).length === 0) continue;
    paths['/' + rel.name] = ops;
    definitions[rel.name] = definition(rel);
  }
  const allowed = new Set(reach.funcs);
  for (const [name, overloads] of cat.functions) {
    const fns = overloads.filter((f) => allowed.has(f.oid));
    if (fns.length > 0) paths['/rpc/' + name] = rpcPath(fns);
  }
  const doc: Schema = {
    swagger: '2.0',
    info: {
      title: 'plinth REST',
      description: 'Tables, views and functions of the public schema that the calling role can reach.',
      version: '1',
    },
    basePath: '/rest/v1',
    schemes: [opts.scheme],
    consumes: ['application/json'],
    produces: ['application/json'],
    paths,
    definitions,
    parameters: SHARED_PARAMETERS,
  };
  if (opts.host) doc.host = opts.host;
  return JSON.parse(JSON.stringify(doc)) as Schema; // drops undefined members
}
