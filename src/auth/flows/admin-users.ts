/**
 * Admins manage users (service role; docs/api/auth.md, "Admin"), in GoTrue's shapes:
 *   GET  /auth/v1/admin/users/{id}      the user with app_metadata, confirmation, ban
 *   PUT  /auth/v1/admin/users/{id}      email, password, user_metadata, app_metadata, role,
 *                                       email_confirm, ban_duration ("24h", "none")
 *   POST /auth/v1/invite                creates the user and emails a 24-hour sign-in link
 *   POST /auth/v1/admin/generate_link   the link an email would carry, sent nowhere
 * The rules (merging, bans, who an invite is for) are SQL's (admin_users.sql).
 */
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { AppError, ERRORS } from '../../core/errors.ts';
import { adminGenerateLink, adminGetUser, adminInviteUser, adminUpdateUser, parseBanDuration, type LinkType } from '../admin-db.ts';
import { composeEmail } from '../mail.ts';
import { hashPassword } from '../passwords.ts';
import { AUTH_ERRORS } from '../errors.ts';
import { auditContext } from '../sessions.ts';
import { newOpaqueToken, seal } from '../tokens.ts';
import { checkEmail, checkPassword } from '../validate.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const ADMIN_USER_ERRORS = {
  invalidBanDuration: () => new AppError(400, 'invalid ban_duration'),
  invalidLinkType: () => new AppError(400, 'invalid link type'),
} as const;

const str = { type: 'string' } as const;
const obj = { type: 'object' } as const;
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

function unreachable(status: never): never {
  throw new Error(`unexpected status ${String(status)}`);
}

function userId(id: string): string {
  if (!UUID.test(id)) throw AUTH_ERRORS.invalidUserId();
  return id;
}

function body<T>(b: T | undefined): T {
  if (b === undefined || b === null || typeof b !== 'object' || Array.isArray(b)) throw ERRORS.invalidBody();
  return b;
}

export function registerAdminUserRoutes(app: FastifyInstance, deps: Deps): void {
  const { config, db, credentials } = deps;
  const sql = db.sql;
  const serviceRole = credentials.requireRole('service_role');

  app.get<{ Params: { id: string } }>('/auth/v1/admin/users/:id', { onRequest: serviceRole }, async (req, reply) => {
    const r = await adminGetUser(sql, userId(req.params.id));
    if (r.status === 'not_found') throw AUTH_ERRORS.userNotFound();
    return reply.code(200).send(r.user_json);
  });

  app.put<{ Params: { id: string }; Body: UpdateBody }>(
    '/auth/v1/admin/users/:id',
    { schema: { body: updateSchema }, onRequest: serviceRole },
    async (req, reply) => {
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
        context: auditContext(req, config),
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
    },
  );

  app.post<{ Body: InviteBody }>('/auth/v1/invite', { schema: { body: inviteSchema }, onRequest: serviceRole }, async (req, reply) => {
    const b = body(req.body);
    checkEmail(b.email);
    const t = newOpaqueToken();
    const r = await adminInviteUser(sql, b.email, b.data ?? null, t.hash, seal(config.secret, t.token), auditContext(req, config));
    switch (r.status) {
      case 'ok':
        return reply.code(200).send(r.user_json);
      case 'email_taken':
        throw AUTH_ERRORS.emailTaken();
      default:
        return unreachable(r.status);
    }
  });

  app.post<{ Body: LinkBody }>('/auth/v1/admin/generate_link', { schema: { body: linkSchema }, onRequest: serviceRole }, async (req, reply) => {
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
      auditContext(req, config),
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
  });
}
