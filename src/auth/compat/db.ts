/** SUPABASE_COMPAT: typed wrappers of sql/fixtures/auth/compat.sql (see src/auth/db.ts for the conventions). */
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

export interface SendLinkInput {
  kind: 'magic_link' | 'recovery';
  email: string;
  createUser: boolean;
  data: Record<string, unknown> | null;
  linkHash: Buffer;
  sealedToken: string;
  codeHash: Buffer;
  sealedCode: string;
  /** GoTrue's mail with its redirect; null: the interface's mail (POST /auth/v1/magiclink). */
  redirectTo: string | null;
  mailLimit: number;
  context: AuditContext | null;
}

export type SendLinkStatus = 'sent' | 'created' | 'not_found' | 'limited';

export async function compatSendLink(sql: Sql, i: SendLinkInput): Promise<SendLinkStatus> {
  const [r] = await call(
    sql<{ status: SendLinkStatus }[]>`select auth.compat_send_link(${i.kind}, ${i.email}, ${i.createUser},
      ${i.data === null ? null : sql.json(i.data as postgres.JSONValue)}::jsonb, ${i.linkHash}, ${i.sealedToken}, ${i.codeHash},
      ${i.sealedCode}, ${i.redirectTo}, ${i.mailLimit}, ${auditParam(sql, i.context)}::jsonb) as status`,
  );
  return r.status;
}

export async function compatVerify(
  sql: Sql,
  kind: 'magic_link' | 'recovery' | 'verification',
  tokenHash: Buffer,
  refreshHash: Buffer,
  ttlSeconds: number,
  context: AuditContext | null,
): Promise<GrantRow<'ok' | 'invalid'>> {
  const [r] = await call(
    sql<GrantRow<'ok' | 'invalid'>[]>`select * from auth.compat_verify(${kind}, ${tokenHash}, ${refreshHash}, ${ttlSeconds},
      ${auditParam(sql, context)}::jsonb)`,
  );
  return r;
}

export async function compatEndSessions(sql: Sql, userId: string, sessionId: string | null, scope: string, context: AuditContext | null): Promise<'ok'> {
  const [r] = await call(
    sql<{ status: 'ok' }[]>`select auth.compat_end_sessions(${userId}::uuid, ${sessionId}::uuid, ${scope}, ${auditParam(sql, context)}::jsonb) as status`,
  );
  return r.status;
}
