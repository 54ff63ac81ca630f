/**
 * Admins manage users (service role; docs/api/auth.md, "Admin"), in GoTrue's shapes:
 *   GET  /auth/v1/admin/users           every user
 *   POST /auth/v1/admin/users           creates a user (email, password, role, email_confirm)
 *   DELETE /auth/v1/admin/users/{id}    deletes the user
 *   GET  /auth/v1/admin/users/{id}      the user with app_metadata, confirmation, ban
 *   PUT  /auth/v1/admin/users/{id}      email, password, user_metadata, app_metadata, role,
 *                                       email_confirm, ban_duration ("24h", "none")
 *   POST /auth/v1/invite                creates the user and emails a 24-hour sign-in link
 *   POST /auth/v1/admin/generate_link   the link an email would carry, sent nowhere
 * The rules (merging, bans, who an invite is for) are SQL's (admin_users.sql).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { AppError, unreachable } from '../../core/errors.ts';
import { adminGenerateLink, adminGetUser, adminInviteUser, adminUpdateUser, parseBanDuration, type LinkType } from '../admin-db.ts';
import { composeEmail } from '../mail.ts';
import { hashPassword } from '../passwords.ts';
import { AUTH_ERRORS } from '../errors.ts';
import { newOpaqueToken, seal } from '../tokens.ts';
import { checkEmail, checkPassword } from '../validate.ts';
import * as q from '../db.ts';
import { authRoom, body, obj, str, UUID, type AuthRoom } from './room.ts';

export const ADMIN_USER_ERRORS = {
  invalidBanDuration: () => new AppError(400, 'invalid ban_duration'),
  invalidLinkType: () => new AppError(400, 'invalid link type'),
} as const;

const ROLES = ['anon', 'authenticated', 'service_role'] as const;

const updateSchema = {
  type: 'object',
  properties: {
    email: str,
    password: str,
    user_metadata: obj,
    app_metadata: obj,
    role: { type: 'string', enum: ROLES },
    email_confirm: { type: 'boolean' },
    ban_duration: str,
  },
} as const;
const adminCreateSchema = {
  type: 'object',
  required: ['email'],
  properties: { email: str, password: str, role: { type: 'string', enum: ROLES }, email_confirm: { type: 'boolean' } },
} as const;
const inviteSchema = { type: 'object', required: ['email'], properties: { email: str, data: obj } } as const;
const linkSchema = {
  type: 'object',
  required: ['type', 'email'],
  properties: { type: str, email: str, password: str, data: obj, new_email: str, redirect_to: str },
} as const;

interface UpdateBody {
  email?: string;
  password?: string;
  user_metadata?: Record<string, unknown>;
  app_metadata?: Record<string, unknown>;
  role?: (typeof ROLES)[number];
  email_confirm?: boolean;
  ban_duration?: string;
}
interface AdminCreateBody {
  email: string;
  password?: string;
  role?: (typeof ROLES)[number];
  email_confirm?: boolean;
}
interface InviteBody {
  email: string;
  data?: Record<string, unknown>;
}
interface LinkBody {
  type: string;
  email: string;
  password?: string;
  data?: Record<string, unknown>;
}

const LINK_TYPES: ReadonlySet<string> = new Set<LinkType>(['signup', 'invite', 'magiclink', 'recovery']);
/** The email whose link each verification type is (mail.ts builds the link). */
const LINK_MAIL = { signup: 'verification', invite: 'invite', magiclink: 'magic_link', recovery: 'recovery' } as const;

type UserParams = { Params: { id: string } };

function userId(id: string): string {
  if (!UUID.test(id)) throw AUTH_ERRORS.invalidUserId();
  return id;
}

async function listUsers(room: AuthRoom, _req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  return reply.code(200).type('application/json; charset=utf-8').send(await q.listUsers(room.sql));
}

async function createUser(room: AuthRoom, req: FastifyRequest<{ Body: AdminCreateBody }>, reply: FastifyReply): Promise<FastifyReply> {
  const { sql, audit } = room;
  // Unknown fields (user_metadata, data …) are ignored: the admin API has no metadata field.
  const b = body(req.body);
  checkEmail(b.email);
  if (b.password !== undefined) checkPassword(b.password);
  const r = await q.adminCreateUser(sql, {
    email: b.email,
    passwordHash: b.password === undefined ? null : await hashPassword(b.password),
    role: b.role ?? 'authenticated',
    emailConfirm: b.email_confirm === true,
    context: audit(req),
  });
  switch (r.status) {
    case 'ok':
      return reply.code(201).send(r.user_json);
    case 'email_taken':
      throw AUTH_ERRORS.emailTaken();
    default:
      return unreachable(r.status);
  }
}

async function deleteUser(room: AuthRoom, req: FastifyRequest<UserParams>, reply: FastifyReply): Promise<FastifyReply> {
  if (!UUID.test(req.params.id)) throw AUTH_ERRORS.invalidUserId();
  const status = await q.deleteUser(room.sql, req.params.id, room.audit(req));
  switch (status) {
    case 'ok':
      return reply.code(204).send();
    case 'not_found':
      throw AUTH_ERRORS.userNotFound();
    default:
      return unreachable(status);
  }
}

async function getUser(room: AuthRoom, req: FastifyRequest<UserParams>, reply: FastifyReply): Promise<FastifyReply> {
  const r = await adminGetUser(room.sql, userId(req.params.id));
  if (r.status === 'not_found') throw AUTH_ERRORS.userNotFound();
  return reply.code(200).send(r.user_json);
}

async function updateUser(room: AuthRoom, req: FastifyRequest<UserParams & { Body: UpdateBody }>, reply: FastifyReply): Promise<FastifyReply> {
  const { sql, audit } = room;
  const id = userId(req.params.id);
  const b = body(req.body);
  if (b.email !== undefined) checkEmail(b.email);
  if (b.password !== undefined) checkPassword(b.password);
  let ban: string | null = null;
  if (b.ban_duration !== undefined) {
    ban = await parseBanDuration(sql, b.ban_duration);
    if (ban === null) throw ADMIN_USER_ERRORS.invalidBanDuration();
  }
  const r = await adminUpdateUser(sql, id, {
    email: b.email ?? null,
    passwordHash: b.password === undefined ? null : await hashPassword(b.password),
    userMetadata: b.user_metadata ?? null,
    appMetadata: b.app_metadata ?? null,
    role: b.role ?? null,
    emailConfirm: b.email_confirm ?? null,
    ban,
    context: audit(req),
  });
  switch (r.status) {
    case 'ok':
      return reply.code(200).send(r.user_json);
    case 'not_found':
      throw AUTH_ERRORS.userNotFound();
    case 'email_taken':
      throw AUTH_ERRORS.emailTaken();
    default:
      return unreachable(r.status);
  }
}

async function inviteUser(room: AuthRoom, req: FastifyRequest<{ Body: InviteBody }>, reply: FastifyReply): Promise<FastifyReply> {
  const { config, sql, audit } = room;
  const b = body(req.body);
  checkEmail(b.email);
  const t = newOpaqueToken();
  const r = await adminInviteUser(sql, b.email, b.data ?? null, t.hash, seal(config.secret, t.token), audit(req));
  switch (r.status) {
    case 'ok':
      return reply.code(200).send(r.user_json);
    case 'email_taken':
      throw AUTH_ERRORS.emailTaken();
    default:
      return unreachable(r.status);
  }
}

async function generateLink(room: AuthRoom, req: FastifyRequest<{ Body: LinkBody }>, reply: FastifyReply): Promise<FastifyReply> {
  const { config, sql, audit } = room;
  const b = body(req.body);
  if (!LINK_TYPES.has(b.type)) throw ADMIN_USER_ERRORS.invalidLinkType();
  checkEmail(b.email);
  if (b.password !== undefined) checkPassword(b.password);
  const t = newOpaqueToken();
  const r = await adminGenerateLink(
    sql,
    b.type as LinkType,
    b.email,
    b.password === undefined || b.type !== 'signup' ? null : await hashPassword(b.password),
    b.data ?? null,
    t.hash,
    audit(req),
  );
  switch (r.status) {
    case 'ok': {
      const type = r.verification_type!;
      return reply.code(200).header('cache-control', 'no-store').send({
        ...r.user_json,
        action_link: composeEmail(config, LINK_MAIL[type], t.token).link,
        hashed_token: t.hash.toString('hex'),
        verification_type: type,
        redirect_to: config.siteUrl,
      });
    }
    case 'email_taken':
      throw AUTH_ERRORS.emailTaken();
    case 'not_found':
      throw AUTH_ERRORS.userNotFound();
    default:
      return unreachable(r.status);
  }
}

export function registerAdminUserRoutes(app: FastifyInstance, deps: Deps): void {
  const room = authRoom(deps);
  const onRequest = room.serviceRoleGate;
  app.get('/auth/v1/admin/users', { onRequest }, (req, reply) => listUsers(room, req, reply));
  app.post<{ Body: AdminCreateBody }>('/auth/v1/admin/users', { schema: { body: adminCreateSchema }, onRequest }, (req, reply) =>
    createUser(room, req, reply),
  );
  app.delete<UserParams>('/auth/v1/admin/users/:id', { onRequest }, (req, reply) => deleteUser(room, req, reply));
  app.get<UserParams>('/auth/v1/admin/users/:id', { onRequest }, (req, reply) => getUser(room, req, reply));
  app.put<UserParams & { Body: UpdateBody }>('/auth/v1/admin/users/:id', { schema: { body: updateSchema }, onRequest }, (req, reply) =>
    updateUser(room, req, reply),
  );
  app.post<{ Body: InviteBody }>('/auth/v1/invite', { schema: { body: inviteSchema }, onRequest }, (req, reply) => inviteUser(room, req, reply));
  app.post<{ Body: LinkBody }>('/auth/v1/admin/generate_link', { schema: { body: linkSchema }, onRequest }, (req, reply) =>
    generateLink(room, req, reply),
  );
}
