/** POST /auth/v1/logout: ends the caller's session (its refresh-token family); SUPABASE_COMPAT adds `scope` (compat/hooks.ts). */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { unreachable } from '../../core/errors.ts';
import * as q from '../db.ts';
import { authRoom, optionalBody, UUID, type AuthRoom } from './room.ts';

async function logout(room: AuthRoom, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const { sql, audit, userOf } = room;
  const cred = userOf(req);
  optionalBody(req.body); // absent or an object ({} is what clients send)
  const sessionId = cred.claimsObject.session_id;
  // A token without a session (made by hand with the secret) has no family to end.
  if (typeof sessionId === 'string' && UUID.test(sessionId)) {
    const status = await q.endSession(sql, sessionId, cred.userId, audit(req));
    switch (status) {
      case 'ok':
      case 'not_found': // already ended: logging out twice is not an error
        break;
      default:
        return unreachable(status);
    }
  }
  return reply.code(204).send();
}

export function registerLogoutRoutes(app: FastifyInstance, deps: Deps): void {
  const room = authRoom(deps);
  app.post('/auth/v1/logout', { onRequest: room.userGate }, (req, reply) => logout(room, req, reply));
}
