/**
 * The `Prefer` request header, parsed apart from the query grammar: it is an HTTP header, read
 * by the routes and handed to the compiler as options (docs/api/rest.md, "Prefer").
 */

const C_COMMA = 44;
const C_EQ = 61;
const C_SEMI = 59;

export interface Prefer {
  readonly returnMinimal: boolean;
  readonly count: 'exact' | 'planned' | 'estimated' | null;
}

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
 * Parses the `Prefer` header(s): `return=minimal|representation`, `count=exact|planned|estimated`.
 * Tokens are comma-separated, case-insensitive; unknown tokens are ignored. Later tokens win.
 */
export function parsePrefer(header: string | readonly string[] | undefined | null): Prefer {
  let returnMinimal = false;
  let count: Prefer['count'] = null;
  if (header == null) return { returnMinimal, count };
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
      if (key === 'return') {
        if (val === 'minimal') returnMinimal = true;
        else if (val === 'representation') returnMinimal = false;
      } else if (key === 'count') {
        if (val === 'exact' || val === 'planned' || val === 'estimated') count = val;
      }
    }
    start = end + 1;
  }
  return { returnMinimal, count };
}
