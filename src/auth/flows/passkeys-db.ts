/**
 * The passkeys' SQL entry functions (sql/fixtures/auth/passkeys.sql), one typed wrapper each.
 * Expected outcomes come back as a `status`; anything raised (PT403 `user is banned`) is
 * mapped by pgErrorToAppError with PT codes honoured.
 */
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

/** A passkey as the endpoints answer it (GoTrue's PasskeyListItem). */
export interface PasskeyJson {
  id: string;
  friendly_name?: string;
  created_at: string;
  last_used_at?: string;
}

export type ChallengeKind = 'registration' | 'authentication';

export interface ChallengeRow {
  status: 'ok' | 'user_not_found' | 'anonymous' | 'aal2_required' | 'too_many';
  challenge_id: string | null;
  challenge: Buffer | null;
  expires_at: Date | null;
  user_name: string | null;
  user_display_name: string | null;
  exclude: Buffer[] | null;
}

export async function issueChallenge(
  sql: Sql,
  kind: ChallengeKind,
  userId: string | null,
  aal: string | null,
  ttlSeconds: number,
  maxPasskeys: number,
): Promise<ChallengeRow> {
  const [r] = await call(
    sql<ChallengeRow[]>`select * from auth.passkey_challenge(${kind}, ${userId}::uuid, ${aal}, ${ttlSeconds}, ${maxPasskeys})`,
  );
  return r;
}

export interface ConsumedChallenge {
  status: 'ok' | 'not_found' | 'expired';
  challenge: Buffer | null;
}

export async function consumeChallenge(sql: Sql, challengeId: string, kind: ChallengeKind, userId: string | null): Promise<ConsumedChallenge> {
  const [r] = await call(sql<ConsumedChallenge[]>`select * from auth.passkey_consume_challenge(${challengeId}::uuid, ${kind}, ${userId}::uuid)`);
  return r;
}

export interface NewPasskey {
  userId: string;
  credentialId: Buffer;
  publicKey: Buffer;
  signCount: number;
  transports: string[];
  friendlyName: string | null;
  aaguid: string | null;
  backupEligible: boolean;
  backedUp: boolean;
  maxPasskeys: number;
  context: AuditContext | null;
}

export async function registerPasskey(
  sql: Sql,
  p: NewPasskey,
): Promise<{ status: 'ok' | 'user_not_found' | 'too_many' | 'credential_taken'; passkey: PasskeyJson | null }> {
  const [r] = await call(
    sql<{ status: 'ok' | 'user_not_found' | 'too_many' | 'credential_taken'; passkey: PasskeyJson | null }[]>`
      select * from auth.passkey_register(${p.userId}::uuid, ${p.credentialId}, ${p.publicKey}, ${p.signCount}, ${p.transports}::text[],
        ${p.friendlyName}, ${p.aaguid}::uuid, ${p.backupEligible}, ${p.backedUp}, ${p.maxPasskeys}, ${auditParam(sql, p.context)}::jsonb)`,
  );
  return r;
}

export interface StoredPasskey {
  status: 'ok' | 'not_found';
  passkey_id: string | null;
  user_id: string | null;
  public_key: Buffer | null;
  sign_count: string | null;
  transports: string[] | null;
}

export async function passkeyForCredential(sql: Sql, credentialId: Buffer): Promise<StoredPasskey> {
  const [r] = await call(sql<StoredPasskey[]>`select * from auth.passkey_for_credential(${credentialId})`);
  return r;
}

export type PasskeySignInStatus = 'ok' | 'not_found' | 'counter' | 'user_not_found';

export async function passkeySignIn(
  sql: Sql,
  passkeyId: string,
  newSignCount: number,
  refreshHash: Buffer,
  ttlSeconds: number,
  context: AuditContext | null,
): Promise<GrantRow<PasskeySignInStatus>> {
  const [r] = await call(
    sql<GrantRow<PasskeySignInStatus>[]>`select * from auth.passkey_sign_in(${passkeyId}::uuid, ${newSignCount}, ${refreshHash}, ${ttlSeconds},
      ${auditParam(sql, context)}::jsonb)`,
  );
  return r;
}

/** A user's passkeys; null when there is no such user. */
export async function listPasskeys(sql: Sql, userId: string): Promise<PasskeyJson[] | null> {
  const [r] = await call(sql<{ list: PasskeyJson[] | null }[]>`select auth.passkey_list(${userId}::uuid) as list`);
  return r.list;
}

export async function adminDeletePasskey(sql: Sql, userId: string, passkeyId: string, context: AuditContext | null): Promise<'ok' | 'not_found'> {
  const [r] = await call(
    sql<{ status: 'ok' | 'not_found' }[]>`select auth.passkey_admin_delete(${userId}::uuid, ${passkeyId}::uuid, ${auditParam(sql, context)}::jsonb) as status`,
  );
  return r.status;
}

export async function renamePasskey(
  sql: Sql,
  userId: string,
  passkeyId: string,
  name: string,
  context: AuditContext | null,
): Promise<{ status: 'ok' | 'not_found'; passkey: PasskeyJson | null }> {
  const [r] = await call(
    sql<{ status: 'ok' | 'not_found'; passkey: PasskeyJson | null }[]>`
      select * from auth.passkey_rename(${userId}::uuid, ${passkeyId}::uuid, ${name}, ${auditParam(sql, context)}::jsonb)`,
  );
  return r;
}

export async function deletePasskey(
  sql: Sql,
  userId: string,
  passkeyId: string,
  aal: string | null,
  context: AuditContext | null,
): Promise<'ok' | 'not_found' | 'aal2_required'> {
  const [r] = await call(
    sql<{ status: 'ok' | 'not_found' | 'aal2_required' }[]>`
      select auth.passkey_delete(${userId}::uuid, ${passkeyId}::uuid, ${aal}, ${auditParam(sql, context)}::jsonb) as status`,
  );
  return r.status;
}
