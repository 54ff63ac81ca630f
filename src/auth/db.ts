/**
 * The auth area's SQL entry functions, one typed wrapper each (STYLE, SQL/TS boundary).
 * They run as the connecting role (plain `db.sql`, docs/architecture.md). Expected outcomes come back
 * as a `status` text the routes switch on exhaustively; anything raised is mapped by
 * `pgErrorToAppError(err, {trusted: true})`, which honours `PTnnn` codes here only.
 */
import type postgres from 'postgres';
import type { Sql } from '../core/db.ts';
import { pgErrorToAppError } from '../core/errors.ts';
import type { User } from '../shared/wire.ts';

export type { User };

async function call<T>(q: Promise<T>): Promise<T> {
  try {
    return await q;
  } catch (err) {
    throw pgErrorToAppError(err, { trusted: true });
  }
}

/** One method of a session's `amr` claim. */
export interface AmrEntry {
  method: string;
  timestamp: number;
}

/**
 * `auth.session_result`: what every session-issuing SQL function returns (types.sql); the
 * non-status fields are null unless status is `ok`.
 */
export interface GrantRow<S extends string> {
  status: S;
  session_id: string | null;
  is_anonymous: boolean | null;
  user_json: User | null;
  aal: 'aal1' | 'aal2' | null;
  amr: AmrEntry[] | null;
  /** The `app_metadata` claim (auth_private.app_metadata). */
  app_metadata: Record<string, unknown> | null;
}

export type SessionGrant = GrantRow<string>;

/** What the audit log keeps of a request (audit.sql): never a token, code or password. */
export interface AuditContext {
  ip: string;
  user_agent: string | null;
  /** The service's own id of the request. */
  request_id: string | null;
  /** The caller's X-Request-Id, when it sent a valid one (kept beside, never as, request_id). */
  client_request_id?: string | null;
  /** The request's Accept-Language (first 200 characters): the language of a mail it causes (docs/emails.md). */
  accept_language?: string | null;
}

export function auditParam(sql: Sql, c: AuditContext | null): postgres.Parameter | null {
  return c === null ? null : sql.json(c as unknown as postgres.JSONValue);
}

// ── sessions (sql/fixtures/auth/sessions.sql) ────────────────────────────────────────────

export type StartSessionStatus = 'ok' | 'user_not_found';

export async function startSession(
  sql: Sql,
  userId: string,
  refreshHash: Buffer,
  ttlSeconds: number,
  sessionId: string | null,
  method: string,
  context: AuditContext | null,
): Promise<GrantRow<StartSessionStatus>> {
  const [r] = await call(
    sql<GrantRow<StartSessionStatus>[]>`select * from auth.start_session(${userId}::uuid, ${refreshHash}, ${ttlSeconds}, ${sessionId}::uuid,
      ${method}, ${auditParam(sql, context)}::jsonb)`,
  );
  return r;
}

export type RotateStatus = 'ok' | 'invalid' | 'revoked' | 'reuse_detected' | 'expired';

export async function rotateRefreshToken(
  sql: Sql,
  tokenHash: Buffer,
  nextHash: Buffer,
  ttlSeconds: number,
  context: AuditContext | null,
): Promise<GrantRow<RotateStatus>> {
  const [r] = await call(
    sql<GrantRow<RotateStatus>[]>`select * from auth.rotate_refresh_token(${tokenHash}, ${nextHash}, ${ttlSeconds}, ${auditParam(sql, context)}::jsonb)`,
  );
  return r;
}

export type EndSessionStatus = 'ok' | 'not_found';

export async function endSession(sql: Sql, sessionId: string, userId: string, context: AuditContext | null): Promise<EndSessionStatus> {
  const [r] = await call(
    sql<{ status: EndSessionStatus }[]>`select auth.end_session(${sessionId}::uuid, ${userId}::uuid, ${auditParam(sql, context)}::jsonb) as status`,
  );
  return r.status;
}

// ── rate limits (sql/fixtures/auth/rate_limits.sql) ──────────────────────────────────────

export type RateLimitStatus = 'ok' | 'limited';

export async function takeRateLimit(sql: Sql, bucket: string, ip: string, maxHits: number, windowSeconds: number): Promise<RateLimitStatus> {
  const [r] = await call(
    sql<{ status: RateLimitStatus }[]>`select auth.take_rate_limit(${bucket}, ${ip}, ${maxHits}, ${windowSeconds}) as status`,
  );
  return r.status;
}

// ── accounts (sql/fixtures/auth/accounts.sql) ────────────────────────────────────────────

export type SignUpStatus = 'ok' | 'confirmation_sent' | 'email_taken';

export interface SignUpInput {
  email: string;
  passwordHash: string;
  userMetadata: Record<string, unknown> | null;
  /** Set when REQUIRE_EMAIL_VERIFICATION=true: the verification token (hash and sealed). */
  verification: { hash: Buffer; sealed: string } | null;
  /** Set when a session starts at once. */
  refreshHash: Buffer | null;
  refreshTtl: number;
  context: AuditContext | null;
}

export async function signUp(sql: Sql, i: SignUpInput): Promise<GrantRow<SignUpStatus>> {
  const [r] = await call(
    sql<GrantRow<SignUpStatus>[]>`select * from auth.sign_up(${i.email}, ${i.passwordHash},
      ${i.userMetadata === null ? null : sql.json(i.userMetadata as postgres.JSONValue)}::jsonb,
      ${i.verification?.hash ?? null}::bytea, ${i.verification?.sealed ?? null}::text,
      ${i.refreshHash}::bytea, ${i.refreshTtl}, ${auditParam(sql, i.context)}::jsonb)`,
  );
  return r;
}

export interface PasswordCredentials {
  status: 'ok' | 'not_found';
  user_id: string | null;
  password_hash: string | null;
  email_confirmed: boolean | null;
  role: string | null;
  user_email: string | null;
  is_anonymous: boolean | null;
  app_metadata: Record<string, unknown> | null;
}

/** A password sign-in the service judged wrong: audited (the user when the address names one). */
export async function recordFailedSignIn(sql: Sql, email: string, context: AuditContext | null): Promise<void> {
  await call(sql`select auth.record_failed_sign_in(${email}, ${auditParam(sql, context)}::jsonb)`);
}

export async function passwordCredentials(sql: Sql, email: string): Promise<PasswordCredentials> {
  const [r] = await call(sql<PasswordCredentials[]>`select * from auth.password_credentials(${email})`);
  return r;
}

export async function rehashPassword(sql: Sql, userId: string, oldHash: string, newHash: string): Promise<'ok' | 'not_found'> {
  const [r] = await call(
    sql<{ status: 'ok' | 'not_found' }[]>`select auth.rehash_password(${userId}::uuid, ${oldHash}, ${newHash}) as status`,
  );
  return r.status;
}

export interface UserRow<S extends string> {
  status: S;
  user_json: User | null;
}

export async function getUser(sql: Sql, userId: string): Promise<UserRow<'ok' | 'not_found'>> {
  const [r] = await call(sql<UserRow<'ok' | 'not_found'>[]>`select * from auth.get_user(${userId}::uuid)`);
  return r;
}

export type UpdateUserStatus = 'ok' | 'not_found' | 'email_taken' | 'insufficient_aal';

export interface UpdateUserInput {
  email: string | null;
  passwordHash: string | null;
  userMetadata: Record<string, unknown> | null;
  /** The caller's session (refresh-token family): it survives an email or password change, the others end. */
  sessionId: string | null;
  context: AuditContext | null;
  /** The caller's token's `aal`: with a verified factor the email and password change only at aal2. */
  aal: string | null;
  /** A guest giving an address under REQUIRE_EMAIL_VERIFICATION: the confirmation token (hash and sealed). */
  verification?: { hash: Buffer; sealed: string } | null;
}

export async function updateUser(sql: Sql, userId: string, i: UpdateUserInput): Promise<UserRow<UpdateUserStatus>> {
  const [r] = await call(
    sql<UserRow<UpdateUserStatus>[]>`select * from auth.update_user(${userId}::uuid, ${i.email}::text, ${i.passwordHash}::text,
      ${i.userMetadata === null ? null : sql.json(i.userMetadata as postgres.JSONValue)}::jsonb, ${i.sessionId}::uuid,
      ${auditParam(sql, i.context)}::jsonb, ${i.aal}::text, ${i.verification?.hash ?? null}::bytea, ${i.verification?.sealed ?? null}::text)`,
  );
  return r;
}

export async function signInAnonymously(
  sql: Sql,
  role: string,
  userMetadata: Record<string, unknown> | null,
  refreshHash: Buffer,
  ttlSeconds: number,
  context: AuditContext | null,
): Promise<GrantRow<'ok'>> {
  const [r] = await call(
    sql<GrantRow<'ok'>[]>`select * from auth.sign_in_anonymously(${role},
      ${userMetadata === null ? null : sql.json(userMetadata as postgres.JSONValue)}::jsonb, ${refreshHash}, ${ttlSeconds},
      ${auditParam(sql, context)}::jsonb)`,
  );
  return r;
}

// ── one-time tokens (sql/fixtures/auth/one_time_tokens.sql) ──────────────────────────────

export async function verifyEmail(sql: Sql, tokenHash: Buffer): Promise<'ok' | 'invalid'> {
  const [r] = await call(sql<{ status: 'ok' | 'invalid' }[]>`select auth.verify_email(${tokenHash}) as status`);
  return r.status;
}

/** `limited`: MAIL_RATE_LIMIT_PER_HOUR mails went to the address this hour; nothing is sent (the answer is the same). */
export type MailRequestStatus = 'sent' | 'not_found' | 'limited';

export async function requestRecovery(
  sql: Sql,
  email: string,
  tokenHash: Buffer,
  sealed: string,
  mailLimit: number,
  context: AuditContext | null,
): Promise<MailRequestStatus> {
  const [r] = await call(
    sql<{ status: MailRequestStatus }[]>`select auth.request_recovery(${email}, ${tokenHash}, ${sealed}, ${mailLimit},
      ${auditParam(sql, context)}::jsonb) as status`,
  );
  return r.status;
}

export async function checkRecoveryToken(sql: Sql, tokenHash: Buffer): Promise<'valid' | 'invalid'> {
  const [r] = await call(sql<{ status: 'valid' | 'invalid' }[]>`select auth.check_recovery_token(${tokenHash}) as status`);
  return r.status;
}

export async function confirmRecovery(sql: Sql, tokenHash: Buffer, passwordHash: string, context: AuditContext | null): Promise<'ok' | 'invalid'> {
  const [r] = await call(
    sql<{ status: 'ok' | 'invalid' }[]>`select auth.confirm_recovery(${tokenHash}, ${passwordHash}, ${auditParam(sql, context)}::jsonb) as status`,
  );
  return r.status;
}

export async function requestMagicLink(sql: Sql, email: string, tokenHash: Buffer, sealed: string, mailLimit: number): Promise<MailRequestStatus> {
  const [r] = await call(
    sql<{ status: MailRequestStatus }[]>`select auth.request_magic_link(${email}, ${tokenHash}, ${sealed}, ${mailLimit}) as status`,
  );
  return r.status;
}

export async function verifyMagicLink(
  sql: Sql,
  tokenHash: Buffer,
  refreshHash: Buffer,
  ttlSeconds: number,
  context: AuditContext | null,
): Promise<GrantRow<'ok' | 'invalid'>> {
  const [r] = await call(
    sql<GrantRow<'ok' | 'invalid'>[]>`select * from auth.verify_magic_link(${tokenHash}, ${refreshHash}, ${ttlSeconds}, ${auditParam(sql, context)}::jsonb)`,
  );
  return r;
}

// ── admin (sql/fixtures/auth/admin.sql) ──────────────────────────────────────────────────

/** The JSON text of the user list, sent as is. */
export async function listUsers(sql: Sql): Promise<string> {
  const [r] = await call(sql<{ users: string }[]>`select auth.list_users() as users`);
  return r.users;
}

export interface AdminCreateInput {
  email: string;
  passwordHash: string | null;
  role: string;
  emailConfirm: boolean;
  context: AuditContext | null;
}

export async function adminCreateUser(sql: Sql, i: AdminCreateInput): Promise<UserRow<'ok' | 'email_taken'>> {
  const [r] = await call(
    sql<UserRow<'ok' | 'email_taken'>[]>`select * from auth.admin_create_user(${i.email}, ${i.passwordHash}::text, ${i.role}, ${i.emailConfirm},
      ${auditParam(sql, i.context)}::jsonb)`,
  );
  return r;
}

export async function deleteUser(sql: Sql, userId: string, context: AuditContext | null): Promise<'ok' | 'not_found'> {
  const [r] = await call(sql<{ status: 'ok' | 'not_found' }[]>`select auth.delete_user(${userId}::uuid, ${auditParam(sql, context)}::jsonb) as status`);
  return r.status;
}

// ── housekeeping (sql/fixtures/auth/purge.sql) ───────────────────────────────────────────

export interface PurgeCounts {
  refresh_tokens: number;
  sessions: number;
  one_time_tokens: number;
  rate_limits: number;
  mail_limits: number;
}

export async function purgeExpired(sql: Sql): Promise<PurgeCounts> {
  const [r] = await call(sql<{ counts: PurgeCounts }[]>`select auth.purge_expired() as counts`);
  return r.counts;
}

/** Audit entries past AUTH_AUDIT_RETENTION_DAYS and spent MFA challenges (audit.sql). */
export async function purgeAuditLog(sql: Sql, retentionDays: number): Promise<Record<string, number>> {
  const [r] = await call(sql<{ counts: Record<string, number> }[]>`select auth.purge_audit_log(${retentionDays}) as counts`);
  return r.counts;
}

export interface AuditQuery {
  userId: string | null;
  action: string | null;
  since: string | null;
  until: string | null;
  page: number;
  perPage: number;
}

/** The JSON text of one page of the audit log, newest first. */
export async function listAuditLog(sql: Sql, a: AuditQuery): Promise<string> {
  const [r] = await call(
    sql<{ entries: string }[]>`select auth.list_audit_log(${a.userId}::uuid, ${a.action}::text, ${a.since}::timestamptz,
      ${a.until}::timestamptz, ${a.page}, ${a.perPage}) as entries`,
  );
  return r.entries;
}

// ── MFA (sql/fixtures/auth/mfa.sql) ──────────────────────────────────────────────────────

export interface EnrollRow {
  status: 'ok' | 'user_not_found' | 'aal2_required' | 'name_taken' | 'too_many_factors';
  factor_id: string | null;
  secret: string | null;
  user_email: string | null;
}

export async function mfaEnroll(
  sql: Sql,
  userId: string,
  friendlyName: string | null,
  key: Buffer,
  aal: string | null,
  context: AuditContext | null,
): Promise<EnrollRow> {
  const [r] = await call(
    sql<EnrollRow[]>`select * from auth.mfa_enroll(${userId}::uuid, ${friendlyName}::text, ${key}, ${aal}::text, ${auditParam(sql, context)}::jsonb)`,
  );
  return r;
}

export interface ChallengeRow {
  status: 'ok' | 'factor_not_found';
  challenge_id: string | null;
  expires_at: Date | null;
}

export async function mfaChallenge(sql: Sql, userId: string, factorId: string, ttlSeconds: number): Promise<ChallengeRow> {
  const [r] = await call(sql<ChallengeRow[]>`select * from auth.mfa_challenge(${userId}::uuid, ${factorId}::uuid, ${ttlSeconds})`);
  return r;
}

export type MfaVerifyStatus =
  | 'ok'
  | 'factor_not_found'
  | 'limited'
  | 'challenge_not_found'
  | 'challenge_expired'
  | 'session_not_found'
  | 'invalid_code';

export interface MfaVerifyInput {
  userId: string;
  sessionId: string;
  factorId: string;
  challengeId: string;
  code: string;
  key: Buffer;
  refreshHash: Buffer;
  ttlSeconds: number;
  maxFailures: number;
  windowSeconds: number;
  context: AuditContext | null;
}

export async function mfaVerify(sql: Sql, i: MfaVerifyInput): Promise<GrantRow<MfaVerifyStatus>> {
  const [r] = await call(
    sql<GrantRow<MfaVerifyStatus>[]>`select * from auth.mfa_verify(${i.userId}::uuid, ${i.sessionId}::uuid, ${i.factorId}::uuid,
      ${i.challengeId}::uuid, ${i.code}, ${i.key}, ${i.refreshHash}, ${i.ttlSeconds}, ${i.maxFailures}, ${i.windowSeconds},
      ${auditParam(sql, i.context)}::jsonb)`,
  );
  return r;
}

export async function mfaUnenroll(
  sql: Sql,
  userId: string,
  factorId: string,
  aal: string | null,
  context: AuditContext | null,
): Promise<'ok' | 'not_found' | 'aal2_required'> {
  const [r] = await call(
    sql<{ status: 'ok' | 'not_found' | 'aal2_required' }[]>`select auth.mfa_unenroll(${userId}::uuid, ${factorId}::uuid, ${aal}::text,
      ${auditParam(sql, context)}::jsonb) as status`,
  );
  return r.status;
}

export async function adminListFactors(sql: Sql, userId: string): Promise<{ status: 'ok' | 'not_found'; factors: unknown[] }> {
  const [r] = await call(sql<{ status: 'ok' | 'not_found'; factors: unknown[] }[]>`select * from auth.admin_list_factors(${userId}::uuid)`);
  return r;
}

export async function adminDeleteFactor(sql: Sql, userId: string, factorId: string, context: AuditContext | null): Promise<'ok' | 'not_found'> {
  const [r] = await call(
    sql<{ status: 'ok' | 'not_found' }[]>`select auth.admin_delete_factor(${userId}::uuid, ${factorId}::uuid, ${auditParam(sql, context)}::jsonb) as status`,
  );
  return r.status;
}

// ── the custom access-token hook (sql/fixtures/auth/hook.sql) ────────────────────────────

export interface HookRow {
  status: 'ok' | 'raised' | 'refused' | 'invalid';
  claims: Record<string, unknown> | null;
  refused: string[] | null;
  message: string | null;
  http_code: number | null;
}

/** The pending query, so the caller can cancel it (the hook's time limit); errors are the driver's. */
export function runAccessTokenHook(sql: Sql, hook: string, event: Record<string, unknown>): postgres.PendingQuery<HookRow[]> {
  return sql<HookRow[]>`select * from auth.run_access_token_hook(${hook}, ${sql.json(event as postgres.JSONValue)})`;
}

