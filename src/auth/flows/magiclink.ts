/**
 * The magic link (docs/api/auth.md): POST /auth/v1/magiclink mails a sign-in link to a
 * registered address (the same answer either way), GET /auth/v1/magiclink/verify uses its
 * token once and redirects to SITE_URL with the session in the fragment.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { unreachable } from '../../core/errors.ts';
import * as q from '../db.ts';
import { AUTH_ERRORS, MESSAGES } from '../errors.ts';
import { sessionFragmentUrl, sessionFromGrant } from '../sessions.ts';
import { hashToken, newOpaqueToken, seal } from '../tokens.ts';
import { checkEmail } from '../validate.ts';
import { authRoom, body, emailSchema, grant, type AuthRoom, type EmailBody, type TokenQuery } from './room.ts';

async function requestMagicLink(room: AuthRoom, req: FastifyRequest<{ Body: EmailBody }>, reply: FastifyReply): Promise<FastifyReply> {
  const { config, sql } = room;
  const b = body(req.body);
  checkEmail(b.email);
  const t = newOpaqueToken();
  const status = await q.requestMagicLink(sql, b.email, t.hash, seal(config.secret, t.token), config.mailRateLimitPerHour);
  switch (status) {
    case 'sent':
    case 'not_found': // sent only to registered addresses; the same answer either way
    case 'limited': // and silently nothing over MAIL_RATE_LIMIT_PER_HOUR
      return reply.code(200).send({ message: MESSAGES.magicLinkSent });
    default:
      return unreachable(status);
  }
}

async function verifyMagicLink(room: AuthRoom, req: FastifyRequest<{ Querystring: TokenQuery }>, reply: FastifyReply): Promise<FastifyReply> {
  const { deps, config, sql, audit } = room;
  const token = req.query.token;
  if (typeof token !== 'string' || token === '') throw AUTH_ERRORS.invalidOneTimeToken();
  const refresh = newOpaqueToken();
  const r = await q.verifyMagicLink(sql, hashToken(token), refresh.hash, config.refreshTokenTtl, audit(req));
  switch (r.status) {
    case 'ok': {
      const session = await sessionFromGrant(deps, grant(r), refresh.token, 'magiclink');
      return reply
        .code(302)
        .header('cache-control', 'no-store')
        .header('referrer-policy', 'no-referrer')
        .header('location', sessionFragmentUrl(config.siteUrl, session))
        .send();
    }
    case 'invalid':
      throw AUTH_ERRORS.invalidOneTimeToken();
    default:
      return unreachable(r.status);
  }
}

export function registerMagicLinkRoutes(app: FastifyInstance, deps: Deps): void {
  const room = authRoom(deps);
  app.post<{ Body: EmailBody }>('/auth/v1/magiclink', { schema: { body: emailSchema }, onRequest: room.authRateLimit }, (req, reply) =>
    requestMagicLink(room, req, reply),
  );
  // No automatic HEAD route: a HEAD (link preview, mail scanner) must not use the token.
  app.get<{ Querystring: TokenQuery }>('/auth/v1/magiclink/verify', { exposeHeadRoute: false }, (req, reply) =>
    verifyMagicLink(room, req, reply),
  );
}
