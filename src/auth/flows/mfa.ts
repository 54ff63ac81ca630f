/**
 * Multi-factor authentication over HTTP, in GoTrue's shapes (docs/api/auth.md, "MFA"):
 * enrol a TOTP factor, challenge it, verify a code (a new session at aal2), unenrol; the
 * admin API lists and deletes a user's factors and reads the audit log.
 *
 * The state machine lives in SQL (sql/fixtures/auth/mfa.sql): factors, challenges, codes
 * used once, the failure limit. This module checks the credential and the body, passes
 * the encryption key, and builds the otpauth URI and its QR code.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import type { Credential } from '../../core/credentials.ts';
import { AppError, ERRORS, unreachable } from '../../core/errors.ts';
import * as q from '../db.ts';
import { isOkGrant, sessionFromGrant, type Session } from '../sessions.ts';
import { mfaKey, newOpaqueToken } from '../tokens.ts';
import { authRoom, str, UUID, type AuthRoom } from './room.ts';

export const MFA_ERRORS = {
  invalidFactorType: () => new AppError(400, 'factor_type must be totp'),
  invalidCode: () => new AppError(400, 'invalid code'),
  challengeExpired: () => new AppError(400, 'challenge expired'),
  invalidAuditQuery: () => new AppError(400, 'invalid audit query'),
  aal2Required: () => new AppError(403, 'this needs a session verified with a second factor (aal2)'),
  factorNotFound: () => new AppError(404, 'factor not found'),
  challengeNotFound: () => new AppError(404, 'challenge not found'),
  factorNameTaken: () => new AppError(409, 'a factor with this friendly name already exists'),
  tooManyFactors: () => new AppError(422, 'too many factors'),
} as const;

/** A challenge lives this long (GoTrue's default). */
const CHALLENGE_TTL_SECONDS = 300;
/** Wrong codes a factor may see in the window before every attempt is refused. */
const VERIFY_MAX_FAILURES = 5;
const VERIFY_WINDOW_SECONDS = 300;

const enrollSchema = {
  type: 'object',
  required: ['factor_type'],
  properties: { factor_type: str, friendly_name: { type: 'string', minLength: 1, maxLength: 100 }, issuer: { type: 'string', maxLength: 100 } },
} as const;
const verifySchema = { type: 'object', required: ['challenge_id', 'code'], properties: { challenge_id: str, code: str } } as const;

interface EnrollBody {
  factor_type: string;
  friendly_name?: string;
  issuer?: string;
}
interface VerifyBody {
  challenge_id: string;
  code: string;
}
interface AuditQuerystring {
  user_id?: string;
  action?: string;
  since?: string;
  until?: string;
  page?: string;
  per_page?: string;
}

function aalOf(cred: Credential): string | null {
  const aal = cred.claimsObject.aal;
  return typeof aal === 'string' ? aal : null;
}

function positiveInt(v: string | undefined, dflt: number, max: number): number {
  if (v === undefined) return dflt;
  if (!/^[0-9]{1,7}$/.test(v)) throw MFA_ERRORS.invalidAuditQuery();
  const n = Number(v);
  if (n < 1 || n > max) throw MFA_ERRORS.invalidAuditQuery();
  return n;
}

function timestamp(v: string | undefined): string | null {
  if (v === undefined) return null;
  if (!/^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(v) || Number.isNaN(Date.parse(v))) throw MFA_ERRORS.invalidAuditQuery();
  return v;
}

/** The otpauth:// URI authenticator apps read (Key Uri Format). */
export function otpauthUri(issuer: string, account: string, secret: string): string {
  const label = `${encodeURIComponent(issuer)}:${encodeURIComponent(account)}`;
  const p = new URLSearchParams({ secret, issuer, algorithm: 'SHA1', digits: '6', period: '30' });
  return `otpauth://totp/${label}?${p.toString()}`;
}

/** The auth room plus the factors' encryption key and the issuer an authenticator app shows. */
interface MfaRoom extends AuthRoom {
  key: ReturnType<typeof mfaKey>;
  defaultIssuer: string;
}

type FactorParams = { Params: { id: string } };

async function enroll(room: MfaRoom, req: FastifyRequest<{ Body: EnrollBody }>, reply: FastifyReply): Promise<FastifyReply> {
  const { sql, key, defaultIssuer, userOf, audit } = room;
  const cred = userOf(req);
  const b = req.body;
  if (b.factor_type !== 'totp') throw MFA_ERRORS.invalidFactorType();
  const r = await q.mfaEnroll(sql, cred.userId, b.friendly_name ?? null, key, aalOf(cred), audit(req));
  switch (r.status) {
    case 'ok': {
      const uri = otpauthUri(b.issuer ?? defaultIssuer, r.user_email!, r.secret!);
      // Loaded at the first enrolment, not at start.
      const { default: QRCode } = await import('qrcode');
      const svg = await QRCode.toString(uri, { type: 'svg', margin: 2 });
      return reply
        .code(200)
        .header('cache-control', 'no-store')
        .send({
          id: r.factor_id,
          type: 'totp',
          friendly_name: b.friendly_name ?? null,
          totp: { qr_code: `data:image/svg+xml;utf-8,${encodeURIComponent(svg)}`, secret: r.secret, uri },
        });
    }
    case 'user_not_found':
      throw new AppError(404, 'user not found');
    case 'aal2_required':
      throw MFA_ERRORS.aal2Required();
    case 'name_taken':
      throw MFA_ERRORS.factorNameTaken();
    case 'too_many_factors':
      throw MFA_ERRORS.tooManyFactors();
    default:
      return unreachable(r.status);
  }
}

async function challenge(room: MfaRoom, req: FastifyRequest<FactorParams>, reply: FastifyReply): Promise<FastifyReply> {
  const cred = room.userOf(req);
  if (!UUID.test(req.params.id)) throw MFA_ERRORS.factorNotFound();
  const r = await q.mfaChallenge(room.sql, cred.userId, req.params.id, CHALLENGE_TTL_SECONDS);
  switch (r.status) {
    case 'ok':
      return reply.code(200).send({ id: r.challenge_id, type: 'totp', expires_at: Math.floor(r.expires_at!.getTime() / 1000) });
    case 'factor_not_found':
      throw MFA_ERRORS.factorNotFound();
    default:
      return unreachable(r.status);
  }
}

async function verify(room: MfaRoom, req: FastifyRequest<FactorParams & { Body: VerifyBody }>, reply: FastifyReply): Promise<FastifyReply> {
  const { deps, config, sql, key, userOf, audit } = room;
  const cred = userOf(req);
  if (!UUID.test(req.params.id)) throw MFA_ERRORS.factorNotFound();
  if (!UUID.test(req.body.challenge_id)) throw MFA_ERRORS.challengeNotFound();
  const sessionId = cred.claimsObject.session_id;
  if (typeof sessionId !== 'string' || !UUID.test(sessionId)) throw ERRORS.invalidToken();
  const refresh = newOpaqueToken();
  const r = await q.mfaVerify(sql, {
    userId: cred.userId,
    sessionId,
    factorId: req.params.id,
    challengeId: req.body.challenge_id,
    code: req.body.code.trim(),
    key,
    refreshHash: refresh.hash,
    ttlSeconds: config.refreshTokenTtl,
    maxFailures: VERIFY_MAX_FAILURES,
    windowSeconds: VERIFY_WINDOW_SECONDS,
    context: audit(req),
  });
  switch (r.status) {
    case 'ok': {
      if (!isOkGrant(r)) throw new Error('mfa_verify: ok without a session');
      const session: Session = await sessionFromGrant(deps, r, refresh.token, 'totp');
      return reply.code(200).header('cache-control', 'no-store').send(session);
    }
    case 'factor_not_found':
      throw MFA_ERRORS.factorNotFound();
    case 'limited':
      throw new AppError(429, 'too many requests, try again later');
    case 'challenge_not_found':
      throw MFA_ERRORS.challengeNotFound();
    case 'challenge_expired':
      throw MFA_ERRORS.challengeExpired();
    case 'session_not_found':
      throw ERRORS.invalidToken();
    case 'invalid_code':
      throw MFA_ERRORS.invalidCode();
    default:
      return unreachable(r.status);
  }
}

async function unenroll(room: MfaRoom, req: FastifyRequest<FactorParams>, reply: FastifyReply): Promise<FastifyReply> {
  const cred = room.userOf(req);
  if (!UUID.test(req.params.id)) throw MFA_ERRORS.factorNotFound();
  const status = await q.mfaUnenroll(room.sql, cred.userId, req.params.id, aalOf(cred), room.audit(req));
  switch (status) {
    case 'ok':
      return reply.code(200).send({ id: req.params.id });
    case 'not_found':
      throw MFA_ERRORS.factorNotFound();
    case 'aal2_required':
      throw MFA_ERRORS.aal2Required();
    default:
      return unreachable(status);
  }
}

// ── admin (service_role) ─────────────────────────────────────────────────────────────

async function adminListFactors(room: AuthRoom, req: FastifyRequest<FactorParams>, reply: FastifyReply): Promise<FastifyReply> {
  if (!UUID.test(req.params.id)) throw new AppError(400, 'invalid user id');
  const r = await q.adminListFactors(room.sql, req.params.id);
  switch (r.status) {
    case 'ok':
      return reply.code(200).send(r.factors);
    case 'not_found':
      throw new AppError(404, 'user not found');
    default:
      return unreachable(r.status);
  }
}

type AdminFactorParams = { Params: { id: string; factorId: string } };

async function adminDeleteFactor(room: AuthRoom, req: FastifyRequest<AdminFactorParams>, reply: FastifyReply): Promise<FastifyReply> {
  if (!UUID.test(req.params.id)) throw new AppError(400, 'invalid user id');
  if (!UUID.test(req.params.factorId)) throw MFA_ERRORS.factorNotFound();
  const status = await q.adminDeleteFactor(room.sql, req.params.id, req.params.factorId, room.audit(req));
  switch (status) {
    case 'ok':
      return reply.code(200).send({ id: req.params.factorId });
    case 'not_found':
      throw MFA_ERRORS.factorNotFound();
    default:
      return unreachable(status);
  }
}

async function adminAudit(room: AuthRoom, req: FastifyRequest<{ Querystring: AuditQuerystring }>, reply: FastifyReply): Promise<FastifyReply> {
  const p = req.query;
  if (p.user_id !== undefined && !UUID.test(p.user_id)) throw MFA_ERRORS.invalidAuditQuery();
  if (p.action !== undefined && !/^[a-z_]{1,64}$/.test(p.action)) throw MFA_ERRORS.invalidAuditQuery();
  const entries = await q.listAuditLog(room.sql, {
    userId: p.user_id ?? null,
    action: p.action ?? null,
    since: timestamp(p.since),
    until: timestamp(p.until),
    page: positiveInt(p.page, 1, 1_000_000),
    perPage: positiveInt(p.per_page, 50, 1000),
  });
  return reply.code(200).type('application/json; charset=utf-8').send(entries);
}

export function registerMfaRoutes(app: FastifyInstance, deps: Deps): void {
  const { config } = deps;
  const base = authRoom(deps);
  const room: MfaRoom = { ...base, key: mfaKey(config.mfaEncryptionKey ?? config.secret), defaultIssuer: new URL(config.siteUrl).hostname };
  const { userGate, serviceRoleGate } = room;

  app.post<{ Body: EnrollBody }>('/auth/v1/factors', { schema: { body: enrollSchema }, onRequest: userGate }, (req, reply) => enroll(room, req, reply));
  app.post<FactorParams>('/auth/v1/factors/:id/challenge', { onRequest: userGate }, (req, reply) => challenge(room, req, reply));
  app.post<FactorParams & { Body: VerifyBody }>('/auth/v1/factors/:id/verify', { schema: { body: verifySchema }, onRequest: userGate }, (req, reply) =>
    verify(room, req, reply),
  );
  app.delete<FactorParams>('/auth/v1/factors/:id', { onRequest: userGate }, (req, reply) => unenroll(room, req, reply));

  app.get<FactorParams>('/auth/v1/admin/users/:id/factors', { onRequest: serviceRoleGate }, (req, reply) => adminListFactors(room, req, reply));
  app.delete<AdminFactorParams>('/auth/v1/admin/users/:id/factors/:factorId', { onRequest: serviceRoleGate }, (req, reply) =>
    adminDeleteFactor(room, req, reply),
  );
  app.get<{ Querystring: AuditQuerystring }>('/auth/v1/admin/audit', { onRequest: serviceRoleGate }, (req, reply) => adminAudit(room, req, reply));
}
