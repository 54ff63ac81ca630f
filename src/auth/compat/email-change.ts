/**
 * SUPABASE_COMPAT: GoTrue's email_change flow (docs/api/supabase.md, "Changing the address").
 * `updateUser({email})` stores the new address as pending and mails it a link and a code
 * (auth.compat_request_email_change); the link (GET /verify, or POST /verify with
 * `token_hash`) or the code (POST /verify with the new `email` and `token`) applies the
 * change and opens a session (auth.compat_verify_email_change). The state machine is SQL
 * (sql/fixtures/auth/email_change.sql); this file translates.
 */
import { randomInt } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { ERRORS, pgErrorToAppError, unreachable } from '../../core/errors.ts';
import { auditParam, type GrantRow } from '../db.ts';
import { AUTH_ERRORS } from '../errors.ts';
import { auditContext, isOkGrant, sessionFromGrant } from '../sessions.ts';
import { codeHash, newOpaqueToken, seal } from '../tokens.ts';
import { compatSession, type GoTrueSession } from './shape.ts';

/** Wrong codes presented for a pending change before it is burnt (as otp.ts's MAX_CODE_ATTEMPTS). */
const MAX_CODE_ATTEMPTS = 5;

type RequestStatus = 'pending' | 'unchanged' | 'direct' | 'insufficient_aal' | 'email_taken' | 'limited' | 'not_found';

/**
 * Ask for a change of `userId`'s address to `email`: `pending` (mailed), `unchanged` (the
 * same address) or `direct` (a guest or an account without an address: the interface's
 * path applies); the refusals throw.
 */
export async function requestEmailChange(
  deps: Deps,
  req: FastifyRequest,
  userId: string,
  email: string,
  aal: string | null,
  redirectTo: string,
): Promise<'pending' | 'unchanged' | 'direct'> {
  const { config } = deps;
  const sql = deps.db.sql;
  const link = newOpaqueToken();
  const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
  let status: RequestStatus;
  try {
    const [r] = await sql<{ status: RequestStatus }[]>`select auth.compat_request_email_change(${userId}::uuid, ${email}, ${aal},
      ${link.hash}, ${seal(config.secret, link.token)}, ${codeHash(email, code)}, ${seal(config.secret, code)}, ${redirectTo},
      ${config.mailRateLimitPerHour}, ${auditParam(sql, auditContext(req, config))}::jsonb) as status`;
    status = r.status;
  } catch (err) {
    throw pgErrorToAppError(err, { trusted: true });
  }
  switch (status) {
    case 'pending':
    case 'unchanged':
    case 'direct':
      return status;
    case 'insufficient_aal':
      throw ERRORS.insufficientAal();
    case 'email_taken':
      throw AUTH_ERRORS.emailTaken();
    case 'limited':
      throw AUTH_ERRORS.tooManyRequests();
    case 'not_found':
      throw AUTH_ERRORS.userNotFound();
    default:
      return unreachable(status);
  }
}

/**
 * Use a pending change's link (`email` null, the link token's hash) or code (`email` the
 * new address, the code's hash): its session, or null when nothing pending matches. An
 * address taken meanwhile throws (409, nothing changed).
 */
export async function verifyEmailChange(deps: Deps, req: FastifyRequest, tokenHash: Buffer, email: string | null): Promise<GoTrueSession | null> {
  const { config } = deps;
  const sql = deps.db.sql;
  const refresh = newOpaqueToken();
  let g: GrantRow<'ok' | 'invalid' | 'email_taken'>;
  try {
    [g] = await sql<GrantRow<'ok' | 'invalid' | 'email_taken'>[]>`select * from auth.compat_verify_email_change(${tokenHash}, ${email},
      ${refresh.hash}, ${config.refreshTokenTtl}, ${MAX_CODE_ATTEMPTS}, ${auditParam(sql, auditContext(req, config))}::jsonb)`;
  } catch (err) {
    throw pgErrorToAppError(err, { trusted: true });
  }
  if (g.status === 'email_taken') throw AUTH_ERRORS.emailTaken();
  if (g.status !== 'ok' || !isOkGrant(g)) return null;
  return compatSession(deps, await sessionFromGrant(deps, g, refresh.token, 'otp'));
}
