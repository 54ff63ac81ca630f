/**
 * Admin routes over a user's sessions (service role): list the refresh-token families, end
 * one (confirming an address is PUT /auth/v1/admin/users/{id}, flows/admin-users.ts). The dashboard's Users view uses them; the SQL
 * functions (sql/fixtures/auth/admin_sessions.sql) own the rows.
 */
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { AppError } from '../../core/errors.ts';
import { sendJsonText } from '../../core/http.ts';
import { AUTH_ERRORS } from '../errors.ts';
import { authRoom, UUID } from './room.ts';

export const ADMIN_SESSION_ERRORS = {
  invalidSessionId: () => new AppError(400, 'invalid session id'),
  sessionNotFound: () => new AppError(404, 'session not found'),
};

export function registerAdminSessionRoutes(app: FastifyInstance, deps: Deps): void {
  const { sql, serviceRoleGate: serviceRole } = authRoom(deps);
  const userId = (id: string) => {
    if (!UUID.test(id)) throw AUTH_ERRORS.invalidUserId();
    return id;
  };

  app.get<{ Params: { id: string } }>('/auth/v1/admin/users/:id/sessions', { onRequest: serviceRole }, async (req, reply) => {
    const [r]: [{ s: string | null }] = await sql`select auth.admin_list_sessions(${userId(req.params.id)})::text as s`;
    if (r.s === null) throw AUTH_ERRORS.userNotFound();
    return sendJsonText(reply, 200, r.s);
  });

  app.delete<{ Params: { id: string; session: string } }>('/auth/v1/admin/users/:id/sessions/:session', { onRequest: serviceRole }, async (req, reply) => {
    const id = userId(req.params.id);
    if (!UUID.test(req.params.session)) throw ADMIN_SESSION_ERRORS.invalidSessionId();
    const [r]: [{ status: string }] = await sql`select auth.admin_revoke_session(${id}, ${req.params.session}) as status`;
    if (r.status !== 'ok') throw ADMIN_SESSION_ERRORS.sessionNotFound();
    return reply.code(200).send({ message: 'session revoked' });
  });
}
