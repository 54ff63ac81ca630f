/** Typed wrappers of sql/fixtures/auth/otp.sql (see src/auth/db.ts for the conventions). */
import type postgres from 'postgres';
import type { Sql } from '../../core/db.ts';
import { pgErrorToAppError } from '../../core/errors.ts';
import { auditParam, type AuditContext, type GrantRow } from '../db.ts';

async function call<T>(q: Promise<T>): Promise<T> {
  try {
    return await q;
  } catch (err) {
    throw pgErrorToAppError(err, { trusted: true });
  }
}

export type PhoneCodeStatus = 'sent' | 'created' | 'not_found' | 'limited';

export interface PhoneCodeInput {
  phone: string;
  createUser: boolean;
  data: Record<string, unknown> | null;
  codeHash: Buffer;
  sealedCode: string;
  smsLimit: number;
  context: AuditContext | null;
}

export async function sendPhoneCode(sql: Sql, i: PhoneCodeInput): Promise<PhoneCodeStatus> {
  const [r] = await call(
    sql<{ status: PhoneCodeStatus }[]>`select auth.send_phone_code(${i.phone}, ${i.createUser},
      ${i.data === null ? null : sql.json(i.data as postgres.JSONValue)}::jsonb, ${i.codeHash}, ${i.sealedCode}, ${i.smsLimit},
      ${auditParam(sql, i.context)}::jsonb) as status`,
  );
  return r.status;
}

/** The token kinds a code may be of, an address (email or phone), the code's hash. */
export interface VerifyCodeInput {
  kinds: readonly string[];
  email: string | null;
  phone: string | null;
  codeHash: Buffer;
  refreshHash: Buffer;
  ttlSeconds: number;
  maxAttempts: number;
  context: AuditContext | null;
}

export async function verifyCode(sql: Sql, i: VerifyCodeInput): Promise<GrantRow<'ok' | 'invalid'>> {
  const [r] = await call(
    sql<GrantRow<'ok' | 'invalid'>[]>`select * from auth.verify_code(${sql.array([...i.kinds])}::text[], ${i.email}, ${i.phone}, ${i.codeHash},
      ${i.refreshHash}, ${i.ttlSeconds}, ${i.maxAttempts}, ${auditParam(sql, i.context)}::jsonb)`,
  );
  return r;
}

/** The send-SMS hook's `user` (GoTrue's User object); null when the user is gone. */
export async function smsHookUser(sql: Sql, userId: string): Promise<Record<string, unknown> | null> {
  const [r] = await call(sql<{ u: Record<string, unknown> | null }[]>`select auth.sms_hook_user(${userId}::uuid) as u`);
  return r.u;
}

export interface SmsHookResult {
  status: 'ok' | 'failed' | 'invalid';
  message: string | null;
}

/** Run the SQL-function send-SMS hook; cancellable (the task holds the time limit). */
export function runSendSmsHook(sql: Sql, fn: string, event: Record<string, unknown>): postgres.PendingQuery<SmsHookResult[]> {
  return sql<SmsHookResult[]>`select * from auth.run_send_sms_hook(${fn}, ${sql.json(event as postgres.JSONValue)}::jsonb)`;
}
