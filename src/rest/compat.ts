/**
 * SUPABASE_COMPAT=true (docs/api/supabase.md): where PostgREST's answer to the same request
 * differs from the interface's, in status and headers only — the rows and the SQL are the
 * same. A write without `Prefer: return=` answers no rows (request.ts decides it); here:
 *
 * - a function returning void answers 204 without a body (the interface: 200 `null`);
 * - a read whose Content-Range shows fewer rows than the total answers 206 (the interface:
 *   only for a page of a `Range` header).
 */
import type { Outcome } from './execute.ts';
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
