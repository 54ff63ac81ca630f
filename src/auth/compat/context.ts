/**
 * SUPABASE_COMPAT: what the compat hooks and routes share: the service's parts, the request
 * helpers, and the two steps every flow ends in (issue a link and a code; use a token).
 */
import { randomInt } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import type { Sql } from '../../core/db.ts';
import type { AuditContext } from '../db.ts';
import { auditContext, isOkGrant, sessionFromGrant } from '../sessions.ts';
import { codeHash, newOpaqueToken, seal } from '../tokens.ts';
import { compatSendLink, compatSendLinkPkce, compatVerify, type PkceChallenge, type SendLinkStatus } from './db.ts';
import { COMPAT_ERRORS, compatSession, type GoTrueSession } from './shape.ts';
import { verifyEmailChange } from './email-change.ts';

export type Hook = (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
export type Body = Record<string, unknown>;

export function queryOf(req: FastifyRequest): Record<string, unknown> {
  return (req.query ?? {}) as Record<string, unknown>;
}

/** The one-time token kinds a GoTrue verification `type` may use, in order. */
export function kindsOf(type: unknown): ('magic_link' | 'verification' | 'recovery')[] {
  switch (type) {
    case 'magiclink':
    case 'email':
      return ['magic_link'];
    case 'signup':
    case 'invite':
      return ['magic_link', 'verification'];
    case 'recovery':
      return ['recovery'];
    case 'email_change': // a pending address change (email-change.ts), not a one-time token
      return [];
    default:
      throw COMPAT_ERRORS.unsupportedType();
  }
}

export interface Compat {
  deps: Deps;
  sql: Sql;
  audit(req: FastifyRequest): AuditContext;
  /** Issue a link token and a 6-digit code to `email` (one mail); with a PKCE challenge, the link's flow state too. */
  sendLink(
    req: FastifyRequest,
    kind: 'magic_link' | 'recovery',
    email: string,
    createUser: boolean,
    data: Body | null,
    redirect: string,
    pkce?: PkceChallenge | null,
  ): Promise<SendLinkStatus>;
  /** Use a token of one of `type`'s kinds (email_change: a pending change's link) and open a session; null when none is valid. */
  verify(req: FastifyRequest, type: unknown, tokenHash: Buffer): Promise<GoTrueSession | null>;
}

export function compatContext(deps: Deps): Compat {
  const { config } = deps;
  const sql = deps.db.sql;
  const audit = (req: FastifyRequest) => auditContext(req, config);
  return {
    deps,
    sql,
    audit,
    async sendLink(req, kind, email, createUser, data, redirect, pkce) {
      const link = newOpaqueToken();
      const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
      const input = {
        kind,
        email,
        createUser,
        data,
        linkHash: link.hash,
        sealedToken: seal(config.secret, link.token),
        codeHash: codeHash(email, code),
        sealedCode: seal(config.secret, code),
        redirectTo: redirect,
        mailLimit: config.mailRateLimitPerHour,
        context: audit(req),
      };
      return pkce ? compatSendLinkPkce(sql, input, pkce) : compatSendLink(sql, input);
    },
    async verify(req, type, tokenHash) {
      if (type === 'email_change') return verifyEmailChange(deps, req, tokenHash, null);
      const refresh = newOpaqueToken();
      for (const kind of kindsOf(type)) {
        const g = await compatVerify(sql, kind, tokenHash, refresh.hash, config.refreshTokenTtl, audit(req));
        if (g.status === 'ok' && isOkGrant(g)) {
          const method = kind === 'magic_link' ? 'magiclink' : kind === 'recovery' ? 'recovery' : 'otp';
          return compatSession(deps, await sessionFromGrant(deps, g, refresh.token, method));
        }
      }
      return null;
    },
  };
}
