/**
 * TypeScript types of what REST exposes, from the same catalog REST uses, in the `Database`
 * shape `@supabase/postgrest-js` (and supabase-js) take as their generic parameter:
 * `Database['public']` with `Tables` (Row, Insert, Update, Relationships), `Views`,
 * `Functions` (Args, Returns), `Enums` and `CompositeTypes`. `npm run gen:types` prints it
 * (src/cli/gen-types.ts).
 *
 * JSON types follow what PostgreSQL's `to_json` answers, which is what REST sends: every
 * number type (int8 and numeric included) is a number, json/jsonb `Json`, arrays arrays,
 * enums their labels, everything else (dates, ranges, uuid, text…) a string.
 */
import { isUnique, type Catalog, type Column, type Func, type Relation, type TypeInfo } from './catalog.ts';

const NUMBER = new Set(['int2', 'int4', 'int8', 'float4', 'float8', 'numeric', 'oid']);
const STRING_CATEGORIES = new Set(['S', 'D', 'T', 'R', 'I', 'V', 'Z']);

const q = (s: string): string => JSON.stringify(s);

/** The TypeScript type of a value of this PostgreSQL type. */
function tsScalar(cat: Catalog, base: string, category: string): string {
  if (NUMBER.has(base)) return 'number';
  if (base === 'bool') return 'boolean';
  if (base === 'json' || base === 'jsonb') return 'Json';
  if (base === 'void') return 'undefined';
  if (category === 'E') return cat.enums.some((e) => e.name === base) ? `Database["public"]["Enums"][${q(base)}]` : 'string';
  if (category === 'C') {
    return cat.relations.has(base) ? `Database["public"]["Tables"][${q(base)}]["Row"]` : 'Json';
  }
  if (STRING_CATEGORIES.has(category) || category === 'U' || category === 'G' || category === 'N') return 'string';
  return 'unknown';
}

function tsType(cat: Catalog, t: TypeInfo): string {
  if (t.category === 'A' && t.elem !== null) {
    const elemCategory = cat.enums.some((e) => e.name === t.elem) ? 'E' : NUMBER.has(t.elem) ? 'N' : 'S';
    return `${tsScalar(cat, t.elem, elemCategory)}[]`;
  }
  return tsScalar(cat, t.base, t.category);
}

function indent(lines: string[], n: number): string[] {
  const pad = ' '.repeat(n);
  return lines.map((l) => (l === '' ? l : pad + l));
}

function objectType(fields: string[]): string[] {
  return fields.length === 0 ? ['{', '  [_ in never]: never', '}'] : ['{', ...indent(fields, 2), '}'];
}

function columnField(cat: Catalog, c: Column, mode: 'Row' | 'Insert' | 'Update'): string {
  let t = tsType(cat, c);
  if (c.nullable) t += ' | null';
  if (mode === 'Row') return `${q(c.name)}: ${t}`;
  if (c.generated) return `${q(c.name)}?: never`;
  const optional = mode === 'Update' || c.nullable || c.hasDefault;
  return `${q(c.name)}${optional ? '?' : ''}: ${t}`;
}

function relationships(rel: Relation): string[] {
  const out: string[] = [];
  for (const fk of rel.outgoing) {
    out.push(
      '{',
      `  foreignKeyName: ${q(fk.name)}`,
      `  columns: [${fk.fromCols.map(q).join(', ')}]`,
      `  isOneToOne: ${isUnique(rel, fk.fromCols)}`,
      `  referencedRelation: ${q(fk.to)}`,
      `  referencedColumns: [${fk.toCols.map(q).join(', ')}]`,
      '},',
    );
  }
  return out.length === 0 ? ['Relationships: []'] : ['Relationships: [', ...indent(out, 2), ']'];
}

function relationType(cat: Catalog, rel: Relation): string[] {
  const lines: string[] = [];
  const modes: ('Row' | 'Insert' | 'Update')[] = ['Row'];
  if (rel.insertable) modes.push('Insert');
  if (rel.updatable) modes.push('Update');
  // A table has all three (postgrest-js's GenericTable); a view what it allows.
  const table = rel.kind === 'r' || rel.kind === 'p';
  if (table) modes.splice(0, modes.length, 'Row', 'Insert', 'Update');
  for (const m of modes) {
    const t = objectType(rel.columnList.map((c) => columnField(cat, c, m)));
    lines.push(`${m}: ${t[0]}`, ...t.slice(1));
  }
  lines.push(...relationships(rel));
  return lines;
}

function functionType(cat: Catalog, fn: Func): string[] {
  const args = fn.inputs.map((a) => `${q(a.name)}${a.hasDefault ? '?' : ''}: ${tsType(cat, a)}`);
  let returns: string;
  if (fn.returnKind === 'composite' && fn.returnType.base === 'record') {
    const cols = fn.outputs.map((o) => `${q(o.name)}: ${tsType(cat, o)} | null`);
    returns = `{ ${cols.join('; ')} }`;
  } else {
    returns = tsType(cat, fn.returnType);
  }
  if (fn.returnsSet) returns = returns.includes(' | ') ? `(${returns})[]` : `${returns}[]`;
  const argLines = args.length === 0 ? ['Args: Record<PropertyKey, never>'] : ['Args: {', ...indent(args, 2), '}'];
  return ['{', ...indent([...argLines, `Returns: ${returns}`], 2), '}'];
}

/** The `Database` type of the exposed schema, as a TypeScript module's text. */
export function generateTypes(cat: Catalog): string {
  const rels = [...cat.relations.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const tables: string[] = [];
  const views: string[] = [];
  for (const rel of rels) {
    const body = relationType(cat, rel);
    const target = rel.kind === 'r' || rel.kind === 'p' ? tables : views;
    target.push(`${q(rel.name)}: {`, ...indent(body, 2), '}');
  }
  const functions: string[] = [];
  for (const name of [...cat.functions.keys()].sort()) {
    const overloads = cat.functions.get(name)!.map((fn) => functionType(cat, fn));
    const first = overloads[0];
    const lines = [`${q(name)}: ${first[0]}`, ...first.slice(1)];
    for (const o of overloads.slice(1)) lines.push(`| ${o[0]}`, ...o.slice(1));
    functions.push(...lines);
  }
  const enums = cat.enums.map((e) => `${q(e.name)}: ${e.labels.length === 0 ? 'never' : e.labels.map(q).join(' | ')}`);
  const section = (name: string, lines: string[]) => {
    const t = objectType(lines);
    return [`${name}: ${t[0]}`, ...t.slice(1)];
  };
  const schema = [
    ...section('Tables', tables),
    ...section('Views', views),
    ...section('Functions', functions),
    ...section('Enums', enums),
    ...section('CompositeTypes', []),
  ];
  return [
    '// Generated by `npm run gen:types` (plinth) from the REST catalog. Do not edit.',
    '',
    'export type Json = string | number | boolean | null | { [key: string]: Json | undefined } | Json[]',
    '',
    'export type Database = {',
    '  __InternalSupabase: {',
    '    PostgrestVersion: "12"',
    '  }',
    '  public: {',
    ...indent(schema, 4),
    '  }',
    '}',
    '',
    'type PublicSchema = Database["public"]',
    'export type Tables<T extends keyof PublicSchema["Tables"]> = PublicSchema["Tables"][T]["Row"]',
    'export type TablesInsert<T extends keyof PublicSchema["Tables"]> = PublicSchema["Tables"][T]["Insert"]',
    'export type TablesUpdate<T extends keyof PublicSchema["Tables"]> = PublicSchema["Tables"][T]["Update"]',
    'export type Enums<T extends keyof PublicSchema["Enums"]> = PublicSchema["Enums"][T]',
    '',
  ].join('\n');
}
