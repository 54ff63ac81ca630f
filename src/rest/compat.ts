/**
 * SUPABASE_COMPAT=true (docs/api/supabase.md): where PostgREST's answer to the same request
 * differs from the interface's, in status and headers only — the rows and the SQL are the
 * same. A write without `Prefer: return=` answers no rows (request.ts decides it); here:
 *
 * - a function returning void answers 204 without a body (the interface: 200 `null`);
 * - a read whose Content-Range shows fewer rows than the total answers 206 (the interface:
 *   only for a page of a `Range` header);
 * - `Preference-Applied` names every preference PostgREST names (the interface: `tx` and
 *   `missing=default` only).
 */
import type { Outcome } from './execute.ts';
import type { Prefer } from './prefer.ts';
import type { Statement } from './statement.ts';

const RANGE = /^(\d+)-(\d+)\/(\d+)$/;

export function compatOutcome(out: Outcome, statement: Statement, read: boolean): Outcome {
  if (statement.voidCall === true && out.status === 200) return { ...out, status: 204, body: null };
  if (read && out.status === 200 && out.contentRange !== null) {
    const m = RANGE.exec(out.contentRange);
    if (m !== null && Number(m[2]) - Number(m[1]) + 1 < Number(m[3])) return { ...out, status: 206 };
  }
  return out;
}

/** The `key=value` tokens of Prefer header(s), lower-cased; a later token wins (as parsePrefer). */
function preferTokens(header: string | readonly string[] | undefined): Map<string, string> {
  const out = new Map<string, string>();
  if (header === undefined) return out;
  for (const token of (typeof header === 'string' ? header : header.join(',')).split(',')) {
    const [kv] = token.split(';');
    const eq = kv.indexOf('=');
    if (eq > 0) out.set(kv.slice(0, eq).trim().toLowerCase(), kv.slice(eq + 1).trim().toLowerCase());
  }
  return out;
}

export interface AppliedContext {
  readonly kind: 'table' | 'rpc';
  readonly method: string;
  /** Whether REST_TX_END lets `tx=` override it. */
  readonly txAllowed: boolean;
  readonly prefer: Prefer;
}

/**
 * `Preference-Applied` as PostgREST answers it (Preferences.hs prefAppliedHeader, with
 * Response.hs responsePreferences): resolution (an upsert), missing (POST, PATCH), return
 * (writes to a table), count, tx (where allowed), handling, and max-affected (with
 * handling=strict: PATCH, DELETE, RPC), in that order; null when none applies.
 */
export function compatPreferenceApplied(header: string | readonly string[] | undefined, c: AppliedContext): string | null {
  const raw = preferTokens(header);
  const table = c.kind === 'table';
  const write = table && c.method !== 'GET' && c.method !== 'HEAD';
  const out: string[] = [];
  if (table && c.method === 'POST' && c.prefer.resolution !== null) out.push(`resolution=${c.prefer.resolution}-duplicates`);
  const missing = raw.get('missing');
  if (table && (c.method === 'POST' || c.method === 'PATCH') && (missing === 'default' || missing === 'null')) out.push(`missing=${missing}`);
  const ret = raw.get('return');
  if (write && (ret === 'minimal' || ret === 'representation')) out.push(`return=${ret}`);
  if (c.prefer.count !== null) out.push(`count=${c.prefer.count}`);
  if (c.prefer.tx !== null && c.txAllowed) out.push(`tx=${c.prefer.tx}`);
  const handling = raw.get('handling');
  if (handling === 'strict' || handling === 'lenient') out.push(`handling=${handling}`);
  if (handling === 'strict' && c.prefer.maxAffected !== null && (c.kind === 'rpc' || c.method === 'PATCH' || c.method === 'DELETE')) {
    out.push(`max-affected=${c.prefer.maxAffected}`);
  }
  return out.length > 0 ? out.join(', ') : null;
}
