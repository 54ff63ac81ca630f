/**
 * The filter of a table subscription, in Supabase Realtime's syntax (docs/api/realtime.md):
 * `column=op.value`, several joined by commas (AND), `not.` before an operator negates it,
 * a value with `,`, `(` or `)` in double quotes. Operators: eq, neq, lt, lte, gt, gte, in.
 *
 * A filter narrows what a subscriber's group may already read (the group's RLS check ran
 * in PostgreSQL); it is applied here to each change's row, per socket, so subscribers of
 * one role and claims share one group whatever their filters.
 */

export type Op = 'eq' | 'neq' | 'lt' | 'lte' | 'gt' | 'gte' | 'in';
const OPS: ReadonlySet<string> = new Set(['eq', 'neq', 'lt', 'lte', 'gt', 'gte', 'in']);

export interface Condition {
  column: string;
  op: Op;
  not: boolean;
  /** The value (for `in`, the values) as written, unquoted. */
  values: string[];
}

/** Splits on `sep` outside double quotes and parentheses. */
function split(text: string, sep: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '"') quoted = !quoted;
    else if (!quoted && ch === '(') depth++;
    else if (!quoted && ch === ')') depth = Math.max(0, depth - 1);
    else if (!quoted && depth === 0 && ch === sep) {
      out.push(text.slice(start, i));
      start = i + 1;
    }
  }
  out.push(text.slice(start));
  return out;
}

function unquote(v: string): string {
  return v.length >= 2 && v.startsWith('"') && v.endsWith('"') ? v.slice(1, -1) : v;
}

/**
 * The conditions of a filter, or a refusal (a message for the join's error reply). An
 * empty or absent filter has none. `columns` null: the columns are not checked (yet).
 */
export function parseFilter(filter: string | undefined | null, columns: readonly string[] | null, max: number): Condition[] | string {
  if (filter === undefined || filter === null || filter === '') return [];
  const parts = split(filter, ',');
  if (parts.length > max) return `filter has more than ${max} conditions (REALTIME_MAX_FILTERS)`;
  const out: Condition[] = [];
  for (const part of parts) {
    const eq = part.indexOf('=');
    if (eq <= 0) return `invalid filter: ${part}`;
    const column = part.slice(0, eq).trim();
    let rest = part.slice(eq + 1);
    let not = false;
    if (rest.startsWith('not.')) {
      not = true;
      rest = rest.slice(4);
    }
    const dot = rest.indexOf('.');
    const op = dot > 0 ? rest.slice(0, dot) : '';
    if (!OPS.has(op)) return `invalid filter operator: ${op === '' ? part : op}`;
    if (columns !== null && !columns.includes(column)) return `invalid filter: column ${column} does not exist`;
    const raw = rest.slice(dot + 1);
    let values: string[];
    if (op === 'in') {
      if (!raw.startsWith('(') || !raw.endsWith(')')) return `invalid filter: in needs a list in parentheses: ${part}`;
      values = split(raw.slice(1, -1), ',').map((v) => unquote(v.trim()));
    } else {
      values = [unquote(raw)];
    }
    out.push({ column, op: op as Op, not, values });
  }
  return out;
}

/** A row's value and a filter's text compared: as numbers when both are, else as text. */
function compare(value: unknown, text: string): number | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number') {
    const n = Number(text);
    if (text.trim() !== '' && Number.isFinite(n)) return value === n ? 0 : value < n ? -1 : 1;
  }
  const s = typeof value === 'string' ? value : JSON.stringify(value);
  return s === text ? 0 : s < text ? -1 : 1;
}

function holds(c: Condition, row: Record<string, unknown>): boolean {
  const v = row[c.column];
  if (c.op === 'in') return c.values.some((x) => compare(v, x) === 0);
  const d = compare(v, c.values[0]);
  if (d === null) return false; // null matches no comparison, as in SQL
  switch (c.op) {
    case 'eq':
      return d === 0;
    case 'neq':
      return d !== 0;
    case 'lt':
      return d < 0;
    case 'lte':
      return d <= 0;
    case 'gt':
      return d > 0;
    case 'gte':
      return d >= 0;
  }
}

/** Every condition holds for `row` (negated ones do not). */
export function matches(conditions: readonly Condition[], row: Record<string, unknown> | null | undefined): boolean {
  if (conditions.length === 0) return true;
  if (row === null || row === undefined) return false;
  for (const c of conditions) {
    if (holds(c, row) === c.not) return false;
  }
  return true;
}

/**
 * What a socket's subscription may want, for the database to match changes to its group
 * before their RLS check (realtime.sql, group_members.wants): its event and, from its first
 * `eq` or `in` condition that is not negated, the column and the values as text and as
 * numbers (a row's value matches as `compare` says: a JSON string by text, a number by
 * value). Anything else is left to `matches`: the database's match may only be wider.
 */
export function wantOf(event: string, conditions: readonly Condition[]): { e: string; c?: string; s?: string[]; n?: number[] } {
  const c = conditions.find((x) => !x.not && (x.op === 'eq' || x.op === 'in'));
  if (c === undefined) return { e: event };
  const n = c.values.filter((v) => v.trim() !== '' && Number.isFinite(Number(v))).map(Number);
  return { e: event, c: c.column, s: c.values, n };
}
