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

/** A PKCE code challenge (GoTrue: `code_challenge`, `code_challenge_method` s256 | plain). */
export interface PkceChallenge {
  challenge: string;
  method: string;
}

export async function compatSendLinkPkce(sql: Sql, i: SendLinkInput, p: PkceChallenge): Promise<SendLinkStatus> {
  const [r] = await call(
    sql<{ status: SendLinkStatus }[]>`select auth.compat_send_link_pkce(${i.kind}, ${i.email}, ${i.createUser},
      ${i.data === null ? null : sql.json(i.data as postgres.JSONValue)}::jsonb, ${i.linkHash}, ${i.sealedToken}, ${i.codeHash},
      ${i.sealedCode}, ${i.redirectTo}, ${i.mailLimit}, ${p.challenge}, ${p.method}, ${auditParam(sql, i.context)}::jsonb) as status`,
  );
  return r.status;
}

export async function compatVerifyPkce(
  sql: Sql,
  kind: 'magic_link' | 'recovery' | 'verification',
  tokenHash: Buffer,
  authCodeHash: Buffer,
): Promise<'implicit' | 'ok' | 'invalid'> {
  const [r] = await call(
    sql<{ status: 'implicit' | 'ok' | 'invalid' }[]>`select auth.compat_verify_pkce(${kind}, ${tokenHash}, ${authCodeHash}) as status`,
  );
  return r.status;
}

export type ExchangeStatus = 'ok' | 'not_found' | 'expired' | 'bad_verifier' | 'user_not_found';

export async function compatExchangePkce(
  sql: Sql,
  authCodeHash: Buffer,
  verifier: string,
  refreshHash: Buffer,
  ttlSeconds: number,
  context: AuditContext | null,
): Promise<GrantRow<ExchangeStatus>> {
  const [r] = await call(
    sql<GrantRow<ExchangeStatus>[]>`select * from auth.compat_exchange_pkce(${authCodeHash}, ${verifier}, ${refreshHash}, ${ttlSeconds},
      ${auditParam(sql, context)}::jsonb)`,
  );
  return r;
}

// ── OAuth with PKCE (compat_pkce.sql) ─────────────────────────────────────────────────

export interface CompatOAuthState {
  redirectTo: string | null;
  challenge: PkceChallenge | null;
}

export async function compatCreateOAuthState(
  sql: Sql,
  s: { stateHash: Buffer; provider: string; codeVerifier: string | null; nonce: string | null; ttlSeconds: number },
  c: CompatOAuthState,
): Promise<void> {
  await call(
    sql`select auth.compat_create_oauth_state(${s.stateHash}, ${s.provider}, ${s.codeVerifier}::text, ${s.nonce}::text, ${s.ttlSeconds},
      ${c.redirectTo}::text, ${c.challenge?.challenge ?? null}::text, ${c.challenge?.method ?? null}::text)`,
  );
}

export async function compatOAuthFlow(sql: Sql, stateHash: Buffer): Promise<{ redirect_to: string | null; pkce: boolean } | null> {
  const [r] = await call(sql<{ redirect_to: string | null; pkce: boolean }[]>`select * from auth.compat_oauth_flow(${stateHash})`);
  return r ?? null;
}

export async function compatOAuthSignInPkce(
  sql: Sql,
  stateHash: Buffer,
  i: { provider: string; email: string | null; emailVerified: boolean; context: AuditContext | null },
  authCodeHash: Buffer,
): Promise<'ok' | 'unverified_email' | 'invalid'> {
  const [r] = await call(
    sql<{ status: 'ok' | 'unverified_email' | 'invalid' }[]>`select auth.compat_oauth_sign_in_pkce(${stateHash}, ${i.provider},
      ${i.email}::text, ${i.emailVerified}, ${authCodeHash}, ${auditParam(sql, i.context)}::jsonb) as status`,
  );
  return r.status;
}
