/**
 * The `Prefer` request header, parsed apart from the query grammar: it is an HTTP header, read
 * by the parse stage (request.ts) and handed to the planner (docs/api/rest.md, "Prefer").
 */

const C_COMMA = 44;
const C_EQ = 61;
const C_SEMI = 59;

export interface Prefer {
  readonly returnMinimal: boolean;
  readonly count: 'exact' | 'planned' | 'estimated' | null;
  /** `tx=commit|rollback`: honoured only where REST_TX_END allows the override. */
  readonly tx: 'commit' | 'rollback' | null;
  /** `handling=strict`: with `max-affected`, more rows than that refuses and rolls back. */
  readonly strict: boolean;
  /** `max-affected=N` (N ≥ 0); null when absent or not a number. */
  readonly maxAffected: number | null;
  /** `missing=default`: a key missing from a row of a bulk insert takes the column default. */
  readonly missingDefault: boolean;
  /** `consistency=strong`: a read goes to the primary, never to a replica. */
  readonly strong: boolean;
  /** `resolution=merge-duplicates|ignore-duplicates`: upsert, honoured only under SUPABASE_COMPAT=true. */
  readonly resolution: 'merge' | 'ignore' | null;
}

/** No Prefer header: every preference at its default. */
export const NO_PREFER: Prefer = Object.freeze({ returnMinimal: false, count: null, tx: null, strict: false, maxAffected: null, missingDefault: false, strong: false, resolution: null });

/** Space, tab, CR or LF, as the query grammar trims. */
function isWs(c: number): boolean {
  return c === 32 || c === 9 || c === 10 || c === 13;
}

/** Trims whitespace of s[from, to) and returns the slice. */
function sliceTrim(s: string, from: number, to: number): string {
  while (from < to && isWs(s.charCodeAt(from))) from++;
  while (to > from && isWs(s.charCodeAt(to - 1))) to--;
  return s.slice(from, to);
}

/**
 * Parses the `Prefer` header(s): `return=minimal|representation`, `count=exact|planned|estimated`,
 * `tx=commit|rollback`, `handling=strict|lenient`, `max-affected=N`, `missing=default|null`,
 * `consistency=strong|eventual`, `resolution=merge-duplicates|ignore-duplicates`.
 * Tokens are comma-separated, case-insensitive; unknown tokens are ignored. Later tokens win.
 */
export function parsePrefer(header: string | readonly string[] | undefined | null): Prefer {
  if (header == null) return NO_PREFER;
  let returnMinimal = false;
  let count: Prefer['count'] = null;
  let tx: Prefer['tx'] = null;
  let strict = false;
  let maxAffected: number | null = null;
  let missingDefault = false;
  let strong = false;
  let resolution: Prefer['resolution'] = null;
  const h = typeof header === 'string' ? header : header.join(',');
  const n = h.length;
  let start = 0;
  while (start <= n) {
    // One token: start … end (the next ',' or the end); key=value, optional ';params' ignored.
    let eq = -1;
    let semi = -1;
    let end = start;
    for (; end < n; end++) {
      const ch = h.charCodeAt(end);
      if (ch === C_COMMA) break;
      if (ch === C_EQ && eq < 0 && semi < 0) eq = end;
      else if (ch === C_SEMI && semi < 0) semi = end;
    }
    if (eq >= 0) {
      const key = sliceTrim(h, start, eq).toLowerCase();
      const val = sliceTrim(h, eq + 1, semi < 0 ? end : semi).toLowerCase();
      switch (key) {
        case 'return':
          if (val === 'minimal') returnMinimal = true;
          else if (val === 'representation') returnMinimal = false;
          break;
        case 'count':
          if (val === 'exact' || val === 'planned' || val === 'estimated') count = val;
          break;
        case 'tx':
          if (val === 'commit' || val === 'rollback') tx = val;
          break;
        case 'handling':
          if (val === 'strict') strict = true;
          else if (val === 'lenient') strict = false;
          break;
        case 'max-affected':
          if (/^\d{1,15}$/.test(val)) maxAffected = Number(val);
          break;
        case 'missing':
          if (val === 'default') missingDefault = true;
          else if (val === 'null') missingDefault = false;
          break;
        case 'consistency':
          if (val === 'strong') strong = true;
          else if (val === 'eventual') strong = false;
          break;
        case 'resolution':
          if (val === 'merge-duplicates') resolution = 'merge';
          else if (val === 'ignore-duplicates') resolution = 'ignore';
          break;
      }
    }
    start = end + 1;
  }
  return { returnMinimal, count, tx, strict, maxAffected, missingDefault, strong, resolution };
}
