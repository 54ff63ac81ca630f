/** GET /auth/v1/verify?token=…: the link of the verification email (docs/api/auth.md); SUPABASE_COMPAT answers it when a `type` is given (compat/hooks.ts). */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { unreachable } from '../../core/errors.ts';
import * as q from '../db.ts';
import { AUTH_ERRORS, MESSAGES } from '../errors.ts';
import { hashToken } from '../tokens.ts';
import { authRoom, type AuthRoom, type TokenQuery } from './room.ts';

async function verifyEmail(room: AuthRoom, req: FastifyRequest<{ Querystring: TokenQuery }>, reply: FastifyReply): Promise<FastifyReply> {
  const token = req.query.token;
  if (typeof token !== 'string' || token === '') throw AUTH_ERRORS.invalidOneTimeToken();
  const status = await q.verifyEmail(room.sql, hashToken(token));
  switch (status) {
    case 'ok':
      return reply.code(200).send({ message: MESSAGES.emailVerified });
    case 'invalid':
      throw AUTH_ERRORS.invalidOneTimeToken();
    default:
      return unreachable(status);
  }
}

export function registerVerifyRoutes(app: FastifyInstance, deps: Deps): void {
  const room = authRoom(deps);
  // No automatic HEAD route: a HEAD (link preview, mail scanner) must not use the token.
  app.get<{ Querystring: TokenQuery }>('/auth/v1/verify', { exposeHeadRoute: false }, (req, reply) => verifyEmail(room, req, reply));
}
