/**
 * Password recovery (docs/api/auth.md): POST /auth/v1/recover mails a one-time token (the
 * same answer whether the address is known or not), POST /auth/v1/recover/confirm sets the
 * new password with it. SUPABASE_COMPAT answers /recover its own way (compat/hooks.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { unreachable } from '../../core/errors.ts';
import * as q from '../db.ts';
import { AUTH_ERRORS, MESSAGES } from '../errors.ts';
import { hashPassword } from '../passwords.ts';
import { hashToken, newOpaqueToken, seal } from '../tokens.ts';
import { checkEmail, passwordProblem } from '../validate.ts';
import { authRoom, body, emailSchema, str, type AuthRoom, type EmailBody } from './room.ts';

const recoverConfirmSchema = { type: 'object', required: ['token', 'password'], properties: { token: str, password: str } } as const;

interface RecoverConfirmBody {
  token: string;
  password: string;
}

async function recover(room: AuthRoom, req: FastifyRequest<{ Body: EmailBody }>, reply: FastifyReply): Promise<FastifyReply> {
  const { config, sql, audit } = room;
  const b = body(req.body);
  checkEmail(b.email);
  const t = newOpaqueToken();
  const status = await q.requestRecovery(sql, b.email, t.hash, seal(config.secret, t.token), config.mailRateLimitPerHour, audit(req));
  switch (status) {
    case 'sent':
    case 'not_found': // the same answer either way (no enumeration)
    case 'limited': // and silently nothing over MAIL_RATE_LIMIT_PER_HOUR
      return reply.code(200).send({ message: MESSAGES.recoverySent });
    default:
      return unreachable(status);
  }
}

async function confirmRecovery(room: AuthRoom, req: FastifyRequest<{ Body: RecoverConfirmBody }>, reply: FastifyReply): Promise<FastifyReply> {
  const { sql, audit } = room;
  const b = body(req.body);
  const tokenHash = hashToken(b.token);
  const problem = passwordProblem(b.password);
  if (problem) {
    // A used or expired token answers `invalid or expired token` whatever the password (docs/api/auth.md).
    if ((await q.checkRecoveryToken(sql, tokenHash)) === 'invalid') throw AUTH_ERRORS.invalidOneTimeToken();
    throw problem;
  }
  const status = await q.confirmRecovery(sql, tokenHash, await hashPassword(b.password), audit(req));
  switch (status) {
    case 'ok':
      return reply.code(200).send({ message: MESSAGES.passwordUpdated });
    case 'invalid':
      throw AUTH_ERRORS.invalidOneTimeToken();
    default:
      return unreachable(status);
  }
}

export function registerRecoveryRoutes(app: FastifyInstance, deps: Deps): void {
  const room = authRoom(deps);
  app.post<{ Body: EmailBody }>('/auth/v1/recover', { schema: { body: emailSchema }, onRequest: room.authRateLimit }, (req, reply) =>
    recover(room, req, reply),
  );
  app.post<{ Body: RecoverConfirmBody }>('/auth/v1/recover/confirm', { schema: { body: recoverConfirmSchema } }, (req, reply) =>
    confirmRecovery(room, req, reply),
  );
}
