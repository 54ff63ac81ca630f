/**
 * SUPABASE_COMPAT: the admin API in GoTrue's shapes, for supabase-js's `auth.admin`
 * (service role): listUsers pages newest first with `{users, aud}`, X-Total-Count and Link;
 * createUser takes `user_metadata` and `app_metadata`; getUserById, updateUserById and
 * inviteUserByEmail answer GoTrue User objects (hooks.ts's reshape); generateLink answers
 * the user with `action_link` (a link to GET /auth/v1/verify with `type` and `redirect_to`,
 * as the compat mails carry), `hashed_token` (what verifyOtp's `token_hash` takes),
 * `email_otp`, `verification_type` and `redirect_to`. The rules stay the admin API's.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, ERRORS, pgErrorToAppError } from '../../core/errors.ts';
import { auditParam } from '../db.ts';
import { AUTH_ERRORS } from '../errors.ts';
import { hashPassword } from '../passwords.ts';
import { checkEmail, checkPassword } from '../validate.ts';
import { redirectTarget } from './shape.ts';
import { isPlainObject } from '../flows/room.ts';
import { queryOf, type Compat, type Hook } from './context.ts';

const ADMIN_ERRORS = {
  page: () => new AppError(400, 'page and per_page must be positive integers'),
} as const;

const POSITIVE = /^[1-9][0-9]{0,8}$/;
const DEFAULT_PER_PAGE = 50;

function positive(v: unknown, fallback: number): number {
  if (v === undefined || v === '') return fallback;
  if (typeof v !== 'string' || !POSITIVE.test(v)) throw ADMIN_ERRORS.page();
  return Number(v);
}

/** GET /admin/users?page=&per_page=: GoTrue's page, with its Link and X-Total-Count headers. */
function listUsers(c: Compat): Hook {
  return async (req, reply) => {
    const query = queryOf(req);
    const page = positive(query.page, 1);
    const perPage = positive(query.per_page, DEFAULT_PER_PAGE);
    let r: { total: string; users: unknown[] };
    try {
      [r] = await c.sql<{ total: string; users: unknown[] }[]>`select total::text, users from auth.compat_list_users(${page}, ${perPage})`;
    } catch (err) {
      throw pgErrorToAppError(err, { trusted: true });
    }
    const total = Number(r.total);
    const pages = Math.ceil(total / perPage);
    const url = new URL(req.url, 'http://plinth');
    const at = (p: number) => {
      url.searchParams.set('page', String(p));
      url.searchParams.set('per_page', String(perPage));
      url.searchParams.sort(); // page first, as Go's Encode: auth-js reads the digit after the first `=`
      return `<${url.pathname}?${url.searchParams.toString()}>`;
    };
    const link = (pages > page ? `${at(page + 1)}; rel="next", ` : '') + `${at(pages)}; rel="last"`;
    return reply.code(200).header('link', link).header('x-total-count', String(total)).send({ users: r.users, aud: 'authenticated' });
  };
}

/** POST /admin/users: GoTrue's createUser, with user_metadata and app_metadata. */
function createUser(c: Compat): Hook {
  return async (req, reply) => {
    const b = req.body;
    if (!isPlainObject(b)) throw ERRORS.invalidBody();
    const { user_metadata: um, app_metadata: am } = b;
    if ((um !== undefined && um !== null && !isPlainObject(um)) || (am !== undefined && am !== null && !isPlainObject(am))) throw ERRORS.invalidBody();
    const email = b.email as string; // the route's schema: a string, required
    checkEmail(email);
    const password = b.password as string | undefined;
    if (password !== undefined) checkPassword(password);
    let r: { status: 'ok' | 'email_taken'; user_json: Record<string, unknown> | null };
    try {
      [r] = await c.sql<{ status: 'ok' | 'email_taken'; user_json: Record<string, unknown> | null }[]>`
        select * from auth.compat_admin_create_user(${email}, ${password === undefined ? null : await hashPassword(password)},
          ${(b.role as string | undefined) ?? 'authenticated'}, ${b.email_confirm === true},
          ${um ? c.sql.json(um as never) : null}::jsonb, ${am ? c.sql.json(am as never) : null}::jsonb,
          ${auditParam(c.sql, c.audit(req))}::jsonb)`;
    } catch (err) {
      throw pgErrorToAppError(err, { trusted: true });
    }
    if (r.status === 'email_taken') throw AUTH_ERRORS.emailTaken();
    return reply.code(200).send(r.user_json);
  };
}

const redirects = new WeakMap<FastifyRequest, string>();

/** POST /admin/generate_link: the redirect checked before any link is made. */
function generateLinkRedirect(c: Compat): Hook {
  return async (req) => {
    const b = isPlainObject(req.body) ? req.body : {};
    redirects.set(req, redirectTarget(c.deps.config, queryOf(req).redirect_to ?? b.redirect_to));
  };
}

/** …and its answer: GoTrue's user with the link properties beside it. */
function generateLinkReply(c: Compat) {
  return async (req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> => {
    if (reply.statusCode !== 200 || !isPlainObject(payload) || typeof payload.action_link !== 'string' || typeof payload.id !== 'string') return payload;
    const token = new URL(payload.action_link).searchParams.get('token') ?? '';
    const type = String(payload.verification_type);
    const redirect = redirects.get(req) ?? c.deps.config.siteUrl;
    const p = new URLSearchParams({ token, type, redirect_to: redirect });
    const user = (await c.sql<{ u: Record<string, unknown> | null }[]>`select auth.compat_user(${payload.id}::uuid) as u`)[0].u ?? {};
    return {
      ...user,
      action_link: `${c.deps.config.apiExternalUrl}/auth/v1/verify?${p.toString()}`,
      email_otp: '',
      hashed_token: token,
      verification_type: type,
      redirect_to: redirect,
    };
  };
}

export function adminHooks(c: Compat): Record<string, Record<string, unknown>> {
  return {
    'GET /auth/v1/admin/users': { preHandler: listUsers(c) },
    'POST /auth/v1/admin/users': { preHandler: createUser(c) },
    'POST /auth/v1/admin/generate_link': { preHandler: generateLinkRedirect(c), preSerialization: generateLinkReply(c) },
  };
}
