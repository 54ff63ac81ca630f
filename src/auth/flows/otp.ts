/**
 * One-time codes (docs/api/auth.md, "Codes by email and phone sign-in"), in both modes:
 * - POST /auth/v1/otp: `phone` → a 6-digit code by SMS through the send-SMS hook (sms.ts);
 *   `email` → the magic-link mail with its code (the interface's /magiclink; under
 *   SUPABASE_COMPAT GoTrue's signInWithOtp, with `create_user`, `data` and `redirect_to`).
 * - POST /auth/v1/verify: `{type, email | phone, token}` → a session, plinth's or (under the
 *   setting) GoTrue's; under the setting also `{type, token_hash}` (a link's token).
 * - `requestMagicLinkWithCode`: the mail of POST /auth/v1/magiclink, its code beside the link.
 *
 * Limits: the `auth` bucket per IP on both routes (AUTH_RATE_LIMIT); per address, 10 codes
 * tried in any hour (bucket `otp_code`) and MAX_CODE_ATTEMPTS wrong ones per code (then it
 * is burnt); SMS_RATE_LIMIT_PER_HOUR codes sent per number. The state machine is SQL
 * (sql/fixtures/auth/otp.sql; compat.sql's compat_send_link and compat_verify).
 */
import { randomInt } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { AppError, ERRORS } from '../../core/errors.ts';
import { clientIp } from '../../core/http.ts';
import { compatContext, kindsOf, queryOf } from '../compat/context.ts';
import { compatSendLink, type SendLinkStatus } from '../compat/db.ts';
import { verifyEmailChange } from '../compat/email-change.ts';
import { pkceOf } from '../compat/pkce.ts';
import { COMPAT_ERRORS, compatSession, redirectTarget } from '../compat/shape.ts';
import * as q from '../db.ts';
import { AUTH_ERRORS, MESSAGES } from '../errors.ts';
import { auditContext, isOkGrant, sessionFromGrant } from '../sessions.ts';
import { codeHash, hashToken, newOpaqueToken, seal } from '../tokens.ts';
import { checkEmail } from '../validate.ts';
import { sendPhoneCode, verifyCode } from './otp-db.ts';
import { isPlainObject, sendSession } from './room.ts';

const AUTH_WINDOW_SECONDS = 60;
/** Wrong or right, codes tried for one address in an hour: a 6-digit code must not be guessable. */
const CODE_TRIES_PER_HOUR = 10;
/** Wrong codes presented for an address before its live code is burnt. */
export const MAX_CODE_ATTEMPTS = 5;

export const OTP_ERRORS = {
  invalidPhone: () => new AppError(400, 'invalid phone number: E.164 required (country code and number, 7 to 15 digits)'),
  phoneDisabled: () => new AppError(400, 'phone sign-in is disabled: no send-SMS hook is configured'),
  invalidChannel: () => new AppError(400, 'channel must be sms'),
} as const;

export const OTP_MESSAGES = {
  codeSent: 'if the number can sign in, a code has been sent',
} as const;

/** A 6-digit code, uniformly drawn. */
export function newCode(): string {
  return String(randomInt(0, 1_000_000)).padStart(6, '0');
}

/**
 * A phone number in E.164, as GoTrue reads one: spaces, dashes, dots and parentheses
 * dropped, the leading `+` optional, then the country code (not 0) and the number, 7 to 15
 * digits in all. Anything else: 400.
 */
export function normalizePhone(v: unknown): string {
  if (typeof v !== 'string' || v.length > 32) throw OTP_ERRORS.invalidPhone();
  const digits = v.replace(/[\s\-.()]/g, '').replace(/^\+/, '');
  if (!/^[1-9][0-9]{6,14}$/.test(digits)) throw OTP_ERRORS.invalidPhone();
  return `+${digits}`;
}

/** The mail of POST /auth/v1/magiclink: a link and a code, one grant (no account is created). */
export async function requestMagicLinkWithCode(deps: Deps, req: FastifyRequest, email: string): Promise<q.MailRequestStatus> {
  const { config } = deps;
  const link = newOpaqueToken();
  const code = newCode();
  const status: SendLinkStatus = await compatSendLink(deps.db.sql, {
    kind: 'magic_link',
    email,
    createUser: false,
    data: null,
    linkHash: link.hash,
    sealedToken: seal(config.secret, link.token),
    codeHash: codeHash(email, code),
    sealedCode: seal(config.secret, code),
    redirectTo: null,
    mailLimit: config.mailRateLimitPerHour,
    context: auditContext(req, config),
  });
  return status === 'created' ? 'sent' : status;
}

/** The token kinds a verification `type` may use with a code: GoTrue's under the setting, email and sms without. */
function codeKinds(type: unknown, compat: boolean): string[] {
  if (type === 'sms') return ['sms'];
  if (compat) return kindsOf(type);
  if (type === 'email' || type === 'magiclink') return ['magic_link'];
  throw COMPAT_ERRORS.unsupportedType();
}

export function registerOtpRoutes(app: FastifyInstance, deps: Deps): void {
  const { config } = deps;
  const sql = deps.db.sql;
  const compat = config.supabaseCompat;
  const c = compat ? compatContext(deps) : null;

  async function authRateLimit(req: FastifyRequest): Promise<void> {
    if (config.authRateLimit === 0) return;
    const status = await q.takeRateLimit(sql, 'auth', clientIp(req, config.trustProxy), config.authRateLimit, AUTH_WINDOW_SECONDS);
    if (status === 'limited') throw AUTH_ERRORS.tooManyRequests();
  }

  async function phoneOtp(req: FastifyRequest, b: Record<string, unknown>): Promise<object> {
    if (b.email !== undefined) throw ERRORS.invalidBody(); // one of email or phone (GoTrue's rule)
    if (b.channel !== undefined && b.channel !== 'sms') throw OTP_ERRORS.invalidChannel();
    if (config.authHookSendSms === null) throw OTP_ERRORS.phoneDisabled();
    const phone = normalizePhone(b.phone);
    const code = newCode();
    const status = await sendPhoneCode(sql, {
      phone,
      createUser: b.create_user !== false,
      data: (b.data as Record<string, unknown> | undefined) ?? null,
      codeHash: codeHash(phone, code),
      sealedCode: seal(config.secret, code),
      smsLimit: config.smsRateLimitPerHour,
      context: auditContext(req, config),
    });
    if (status === 'limited') throw AUTH_ERRORS.tooManyRequests(); // counted for every number: tells nothing about it
    // GoTrue's answer to create_user:false for an unknown number, which the setting opts into.
    if (status === 'not_found' && compat && b.create_user === false) throw COMPAT_ERRORS.signupsNotAllowedForOtp();
    return compat ? {} : { message: OTP_MESSAGES.codeSent };
  }

  app.post('/auth/v1/otp', { onRequest: authRateLimit }, async (req, reply) => {
    const b = req.body;
    if (!isPlainObject(b)) throw ERRORS.invalidBody();
    if (b.data !== undefined && b.data !== null && !isPlainObject(b.data)) throw ERRORS.invalidBody();
    if (b.create_user !== undefined && typeof b.create_user !== 'boolean') throw ERRORS.invalidBody();
    if (b.phone !== undefined) return reply.code(200).send(await phoneOtp(req, b));
    if (typeof b.email !== 'string') throw ERRORS.invalidBody();
    checkEmail(b.email);
    if (c === null) {
      await requestMagicLinkWithCode(deps, req, b.email); // sent, not_found or limited: the same answer
      return reply.code(200).send({ message: MESSAGES.magicLinkSent });
    }
    const redirect = redirectTarget(config, queryOf(req).redirect_to);
    const pkce = pkceOf(b);
    const status = await c.sendLink(req, 'magic_link', b.email, b.create_user !== false, (b.data as Record<string, unknown> | undefined) ?? null, redirect, pkce);
    if (status === 'not_found' && b.create_user === false) throw COMPAT_ERRORS.signupsNotAllowedForOtp();
    return reply.code(200).send({});
  });

  app.post('/auth/v1/verify', { onRequest: authRateLimit }, async (req, reply) => {
    const b = req.body;
    if (!isPlainObject(b)) throw ERRORS.invalidBody();
    if (c !== null && typeof b.token_hash === 'string' && b.token_hash !== '') {
      const s = await c.verify(req, b.type, hashToken(b.token_hash));
      if (s === null) throw AUTH_ERRORS.invalidOneTimeToken();
      return sendSession(reply, 200, s);
    }
    if (typeof b.token !== 'string') throw ERRORS.invalidBody();
    const kinds = codeKinds(b.type, compat);
    const sms = kinds[0] === 'sms';
    if (!sms && typeof b.email !== 'string') throw ERRORS.invalidBody();
    if (!sms) checkEmail(b.email as string);
    const address = sms ? normalizePhone(b.phone) : (b.email as string).toLowerCase();
    const [email, phone] = sms ? [null, address] : [address, null];
    const limit = await q.takeRateLimit(sql, 'otp_code', address, CODE_TRIES_PER_HOUR, 3600);
    if (limit === 'limited') throw AUTH_ERRORS.tooManyRequests();
    if (c !== null && b.type === 'email_change' && email !== null) {
      // The code of a pending address change, sent to the new address (compat/email-change.ts).
      const s = await verifyEmailChange(deps, req, codeHash(email, b.token.trim()), email);
      if (s === null) throw AUTH_ERRORS.invalidOneTimeToken();
      return sendSession(reply, 200, s);
    }
    const refresh = newOpaqueToken();
    const g = await verifyCode(sql, {
      kinds,
      email,
      phone,
      codeHash: codeHash(address, b.token.trim()),
      refreshHash: refresh.hash,
      ttlSeconds: config.refreshTokenTtl,
      maxAttempts: MAX_CODE_ATTEMPTS,
      context: auditContext(req, config),
    });
    if (g.status !== 'ok' || !isOkGrant(g)) throw AUTH_ERRORS.invalidOneTimeToken();
    const session = await sessionFromGrant(deps, g, refresh.token, 'otp');
    return sendSession(reply, 200, c === null ? session : await compatSession(deps, session));
  });
}
