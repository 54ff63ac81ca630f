/**
 * OAuth's SQL entry functions (sql/fixtures/auth/oauth.sql), one typed wrapper each, as in
 * `../db.ts`: they run as the connecting role, expected outcomes come back as a `status`,
 * anything raised is mapped by `pgErrorToAppError(err, {trusted: true})`.
 */
import type { Sql } from '../../core/db.ts';
import type { OAuthProviderName } from '../../core/config.ts';
import { pgErrorToAppError } from '../../core/errors.ts';
import { auditParam, type AuditContext, type GrantRow } from '../db.ts';

async function call<T>(q: Promise<T>): Promise<T> {
  try {
    return await q;
  } catch (err) {
    throw pgErrorToAppError(err, { trusted: true });
  }
}

export interface NewOAuthState {
  stateHash: Buffer;
  provider: OAuthProviderName;
  /** PKCE code verifier; null for providers without PKCE. */
  codeVerifier: string | null;
  /** OpenID nonce; null for providers without an id_token. */
  nonce: string | null;
  ttlSeconds: number;
}

export async function createOAuthState(sql: Sql, s: NewOAuthState): Promise<void> {
  await call(
    sql`select auth.create_oauth_state(${s.stateHash}, ${s.provider}, ${s.codeVerifier}::text, ${s.nonce}::text, ${s.ttlSeconds})`,
  );
}

export type ConsumeStateStatus = 'ok' | 'invalid' | 'expired' | 'used';

export interface ConsumedState {
  status: ConsumeStateStatus;
  provider: OAuthProviderName | null;
  code_verifier: string | null;
  nonce: string | null;
}

export async function consumeOAuthState(sql: Sql, stateHash: Buffer): Promise<ConsumedState> {
  const [r] = await call(sql<ConsumedState[]>`select * from auth.consume_oauth_state(${stateHash})`);
  return r;
}

export type OAuthSignInStatus = 'ok' | 'unverified_email';

export interface OAuthSignInInput {
  provider: OAuthProviderName;
  email: string | null;
  emailVerified: boolean;
  refreshHash: Buffer;
  refreshTtl: number;
  context: AuditContext | null;
}

export async function oauthSignIn(sql: Sql, i: OAuthSignInInput): Promise<GrantRow<OAuthSignInStatus>> {
  const [r] = await call(
    sql<GrantRow<OAuthSignInStatus>[]>`select * from auth.oauth_sign_in(${i.provider}, ${i.email}::text, ${i.emailVerified},
      ${i.refreshHash}, ${i.refreshTtl}, ${auditParam(sql, i.context)}::jsonb)`,
  );
  return r;
}

// ── a guest links an identity (sql/fixtures/auth/oauth_link.sql) ────────────────────────

export async function createOAuthLinkState(sql: Sql, s: NewOAuthState, userId: string): Promise<'ok' | 'not_a_guest'> {
  const [r] = await call(
    sql<{ status: 'ok' | 'not_a_guest' }[]>`select auth.create_oauth_link_state(${s.stateHash}, ${s.provider}, ${s.codeVerifier}::text,
      ${s.nonce}::text, ${s.ttlSeconds}, ${userId}::uuid) as status`,
  );
  return r.status;
}

export async function oauthStateLinkUser(sql: Sql, stateHash: Buffer): Promise<string | null> {
  const [r] = await call(sql<{ u: string | null }[]>`select auth.oauth_state_link_user(${stateHash}) as u`);
  return r.u;
}

export type OAuthLinkStatus = OAuthSignInStatus | 'email_taken' | 'not_a_guest';

export async function oauthLinkGuest(sql: Sql, userId: string, i: OAuthSignInInput): Promise<GrantRow<OAuthLinkStatus>> {
  const [r] = await call(
    sql<GrantRow<OAuthLinkStatus>[]>`select * from auth.oauth_link_guest(${userId}::uuid, ${i.provider}, ${i.email}::text, ${i.emailVerified},
      ${i.refreshHash}, ${i.refreshTtl}, ${auditParam(sql, i.context)}::jsonb)`,
  );
  return r;
}
