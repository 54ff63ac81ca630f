/**
 * Why a request was refused, in words, for the log line of a 4xx in development mode (the
 * response keeps the interface's message): PostgreSQL's message with its column, constraint
 * and table, the reason a check of plinth's gave (`internal.reason`), or what the request
 * body's validation said. Outside development mode the log keeps the SQLSTATE and the
 * constraint only (src/core/http.ts).
 */
import type { AppError } from './errors.ts';

/** The fields both PostgreSQL drivers give a server error (porsager's `*_name`, node-postgres' short names). */
interface DbError {
  code?: unknown;
  message?: unknown;
  detail?: unknown;
  hint?: unknown;
  column_name?: unknown;
  column?: unknown;
  constraint_name?: unknown;
  constraint?: unknown;
  table_name?: unknown;
  table?: unknown;
}

const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** `{reason, column?, constraint?, table?}` for the log line, or nothing when there is nothing to add. */
export function reasonOf(appErr: AppError, err: unknown): Record<string, string> {
  const given = text(appErr.internal?.reason);
  if (given !== undefined) return { reason: given };
  const cause = (appErr.cause ?? (err !== appErr ? err : undefined)) as DbError | undefined;
  if (cause === undefined || cause === null || typeof cause !== 'object') {
    const column = text(appErr.internal?.column);
    const relation = text(appErr.internal?.relation);
    const fn = text(appErr.internal?.function);
    if (column !== undefined) return { reason: `no column ${column}${relation ? ` in ${relation}` : ''}` };
    if (relation !== undefined) return { reason: `no table or view public.${relation} that REST serves (a new one is served a moment after its DDL commits)` };
    if (fn !== undefined) return { reason: `no function public.${fn} that RPC serves (a new one is served a moment after its DDL commits; it needs grant execute)` };
    return {};
  }
  const message = text(cause.message);
  if (message === undefined || message === appErr.publicMessage) return {};
  const out: Record<string, string> = {};
  const code = text(cause.code);
  const fromDb = code !== undefined && /^[0-9A-Z]{5}$/.test(code);
  const detail = text(cause.detail);
  const hint = text(cause.hint);
  out.reason = (fromDb ? `PostgreSQL: ${message}` : message) + (detail ? `; ${detail}` : '') + (hint ? ` (hint: ${hint})` : '');
  const column = text(cause.column_name) ?? text(cause.column);
  const constraint = text(cause.constraint_name) ?? text(cause.constraint);
  const table = text(cause.table_name) ?? text(cause.table);
  if (column) out.column = column;
  if (constraint) out.constraint = constraint;
  if (table) out.table = table;
  return out;
}
