/** POST /auth/v1/anonymous: a guest's sign-in (docs/api/auth.md), behind ALLOW_ANONYMOUS_SIGNIN and its rate limit. */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { ERRORS, unreachable } from '../../core/errors.ts';
import * as q from '../db.ts';
import { sessionFromGrant } from '../sessions.ts';
import { newOpaqueToken } from '../tokens.ts';
import { authRoom, grant, isPlainObject, optionalBody, sendSession, type AuthRoom } from './room.ts';

interface AnonymousBody {
  data?: Record<string, unknown>;
}

async function signInAnonymously(room: AuthRoom, req: FastifyRequest<{ Body: AnonymousBody | undefined }>, reply: FastifyReply): Promise<FastifyReply> {
  const { deps, config, sql, audit } = room;
  const b = optionalBody<AnonymousBody>(req.body);
  if (b.data !== undefined && !isPlainObject(b.data)) throw ERRORS.invalidBody();
  const refresh = newOpaqueToken();
  const r = await q.signInAnonymously(sql, config.anonymousRole, b.data ?? null, refresh.hash, config.refreshTokenTtl, audit(req));
  switch (r.status) {
    case 'ok':
      return sendSession(reply, 201, await sessionFromGrant(deps, grant(r), refresh.token, 'anonymous'));
    default:
      return unreachable(r.status);
  }
}

export function registerAnonymousRoutes(app: FastifyInstance, deps: Deps): void {
  const room = authRoom(deps);
  app.post<{ Body: AnonymousBody | undefined }>(
    '/auth/v1/anonymous',
    // No body schema: fastify would refuse an absent body, which this endpoint accepts.
    { onRequest: room.anonymousGate },
    (req, reply) => signInAnonymously(room, req, reply),
  );
}
