/**
 * The signed-in user (docs/api/auth.md): GET /auth/v1/user reads it; PATCH and PUT (GoTrue's
 * is PUT) change its email, password and user_metadata. A guest that gives an email keeps its id
 * and rows and becomes a user once the address is confirmed (auth.update_user and the
 * guests.sql trigger decide): with REQUIRE_EMAIL_VERIFICATION a confirmation email carries
 * the token made here; without it the address counts as confirmed at once. Under
 * SUPABASE_COMPAT an account's new address waits for its mailed link or code instead
 * (compat/email-change.ts); metadata and password beside it apply at once.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { ERRORS, unreachable } from '../../core/errors.ts';
import * as q from '../db.ts';
import { hashPassword } from '../passwords.ts';
import { AUTH_ERRORS } from '../errors.ts';
import { newOpaqueToken, seal } from '../tokens.ts';
import { checkEmail, checkPassword } from '../validate.ts';
import { authRoom, str, UUID, type AuthRoom } from './room.ts';
import { queryOf } from '../compat/context.ts';
import { requestEmailChange } from '../compat/email-change.ts';
import { redirectTarget } from '../compat/shape.ts';

const updateUserSchema = { type: 'object', properties: { email: str, password: str, data: { type: 'object' } } } as const;

interface UpdateUserBody {
  email?: string;
  password?: string;
  data?: Record<string, unknown>;
}

async function getUser(room: AuthRoom, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const r = await q.getUser(room.sql, room.userOf(req).userId);
  switch (r.status) {
    case 'ok':
      return reply.send(r.user_json);
    case 'not_found':
      throw AUTH_ERRORS.userNotFound();
    default:
      return unreachable(r.status);
  }
}

async function sendCurrentUser(room: AuthRoom, userId: string, reply: FastifyReply): Promise<FastifyReply> {
  const r = await q.getUser(room.sql, userId);
  if (r.status === 'not_found') throw AUTH_ERRORS.userNotFound();
  return reply.send(r.user_json);
}

async function updateUser(room: AuthRoom, req: FastifyRequest<{ Body: UpdateUserBody }>, reply: FastifyReply): Promise<FastifyReply> {
  const { config, sql, userOf, audit } = room;
  const cred = userOf(req);
  const b = req.body;
  if (b === undefined || b === null || typeof b !== 'object' || Array.isArray(b)) throw ERRORS.invalidBody();
  if (b.email !== undefined) checkEmail(b.email);
  if (b.password !== undefined) checkPassword(b.password);
  if (b.email === undefined && b.password === undefined && b.data === undefined) return sendCurrentUser(room, cred.userId, reply);
  // SUPABASE_COMPAT: an account's new address waits for the link or code mailed to it (GoTrue's email_change).
  let email = b.email ?? null;
  if (email !== null && config.supabaseCompat) {
    const aal = typeof cred.claimsObject.aal === 'string' ? cred.claimsObject.aal : null;
    const redirect = redirectTarget(config, queryOf(req).redirect_to);
    if ((await requestEmailChange(room.deps, req, cred.userId, email, aal, redirect)) !== 'direct') email = null;
    if (email === null && b.password === undefined && b.data === undefined) return sendCurrentUser(room, cred.userId, reply);
  }
  // A guest giving an address confirms it by the emailed link when confirmation is required.
  let verification: { hash: Buffer; sealed: string } | null = null;
  if (email !== null && cred.claimsObject.is_anonymous === true && config.requireEmailVerification) {
    const t = newOpaqueToken();
    verification = { hash: t.hash, sealed: seal(config.secret, t.token) };
  }
  const sessionId = cred.claimsObject.session_id;
  const r = await q.updateUser(sql, cred.userId, {
    email,
    passwordHash: b.password === undefined ? null : await hashPassword(b.password),
    userMetadata: b.data ?? null,
    // An email or password change ends the user's other sessions; the caller's stays.
    sessionId: typeof sessionId === 'string' && UUID.test(sessionId) ? sessionId : null,
    context: audit(req),
    // With a verified factor, the email and the password change only at aal2 (GoTrue).
    aal: typeof cred.claimsObject.aal === 'string' ? cred.claimsObject.aal : null,
    verification,
  });
  switch (r.status) {
    case 'ok':
      return reply.send(r.user_json);
    case 'not_found':
      throw AUTH_ERRORS.userNotFound();
    case 'email_taken':
      throw AUTH_ERRORS.emailTaken();
    case 'insufficient_aal':
      throw ERRORS.insufficientAal();
    default:
      return unreachable(r.status);
  }
}

export function registerUserRoutes(app: FastifyInstance, deps: Deps): void {
  const room = authRoom(deps);
  app.get('/auth/v1/user', { onRequest: room.userGate }, (req, reply) => getUser(room, req, reply));
  const update = (req: FastifyRequest<{ Body: UpdateUserBody }>, reply: FastifyReply) => updateUser(room, req, reply);
  app.patch<{ Body: UpdateUserBody }>('/auth/v1/user', { schema: { body: updateUserSchema }, onRequest: room.userGate }, update);
  app.put<{ Body: UpdateUserBody }>('/auth/v1/user', { schema: { body: updateUserSchema }, onRequest: room.userGate }, update);
}
