/**
 * What the auth flows share: the gates (onRequest hooks: rate limits, the anonymous switch,
 * the user's token, the service role), the request parsing every flow does the same way, and
 * the one way a session leaves. A flow is `(app, deps) => void` (`AuthFlow`) and gets the
 * room with `authRoom(deps)`: made once per `deps`, so every flow shares one set of gates.
 *
 * Order of checks on every route: the credential or gate (onRequest: rate limit, anonymous
 * switch, JWT, service role) before the body is even read, then the body schema (any
 * failure: 400 `invalid request body`), then the rules of the fields, then one SQL entry
 * function whose `status` is switched on exhaustively.
 *
 * Level None endpoints never look at Authorization or apikey (docs/api/overview.md).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import type { Credential } from '../../core/credentials.ts';
import { ERRORS } from '../../core/errors.ts';
import { clientIp } from '../../core/http.ts';
import * as q from '../db.ts';
import { AUTH_ERRORS } from '../errors.ts';
import type { GoTrueSession } from '../compat/shape.ts';
import { auditContext, isOkGrant, type OkGrant, type Session } from '../sessions.ts';

/** One flow's routes: registered on the area's app by the list in src/auth/index.ts. */
export type AuthFlow = (app: FastifyInstance, deps: Deps) => void;

/** Windows of docs/api/overview.md: the auth bucket counts per minute, guests per hour. */
const AUTH_WINDOW_SECONDS = 60;
const ANONYMOUS_WINDOW_SECONDS = 3600;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Body schema atoms (ajv; coercion off, so a wrong JSON type fails). */
export const str = { type: 'string' } as const;
export const obj = { type: 'object' } as const;
/** A body of one address (recover, magiclink). */
export const emailSchema = { type: 'object', required: ['email'], properties: { email: str } } as const;

export interface EmailBody {
  email: string;
}

export type UserCredential = Credential & { userId: string };

export interface AuthRoom {
  deps: Deps;
  config: Deps['config'];
  sql: Deps['db']['sql'];
  /** The audit context of a request (IP, user agent). */
  audit: (req: FastifyRequest) => q.AuditContext;
  /** AUTH_RATE_LIMIT per client IP and minute, summed over signup, token, recover, magiclink. */
  authRateLimit: (req: FastifyRequest) => Promise<void>;
  /** ALLOW_ANONYMOUS_SIGNIN, then ANONYMOUS_RATE_LIMIT per client IP and hour. */
  anonymousGate: (req: FastifyRequest) => Promise<void>;
  /** A user's access token (401 otherwise); `userOf` reads it in the handler. */
  userGate: (req: FastifyRequest) => Promise<void>;
  userOf: (req: FastifyRequest) => UserCredential;
  serviceRoleGate: (req: FastifyRequest) => Promise<void>;
}

const rooms = new WeakMap<Deps, AuthRoom>();

export function authRoom(deps: Deps): AuthRoom {
  let room = rooms.get(deps);
  if (room === undefined) {
    room = makeRoom(deps);
    rooms.set(deps, room);
  }
  return room;
}

function makeRoom(deps: Deps): AuthRoom {
  const { config, db, credentials } = deps;
  const sql = db.sql;
  const users = new WeakMap<FastifyRequest, UserCredential>();

  async function authRateLimit(req: FastifyRequest): Promise<void> {
    if (config.authRateLimit === 0) return;
    const status = await q.takeRateLimit(sql, 'auth', clientIp(req, config.trustProxy), config.authRateLimit, AUTH_WINDOW_SECONDS);
    if (status === 'limited') throw AUTH_ERRORS.tooManyRequests();
  }

  async function anonymousGate(req: FastifyRequest): Promise<void> {
    if (!config.allowAnonymousSignin) throw AUTH_ERRORS.anonymousDisabled();
    if (config.anonymousRateLimit === 0) return;
    const status = await q.takeRateLimit(sql, 'anonymous', clientIp(req, config.trustProxy), config.anonymousRateLimit, ANONYMOUS_WINDOW_SECONDS);
    if (status === 'limited') throw AUTH_ERRORS.tooManyRequests();
  }

  async function userGate(req: FastifyRequest): Promise<void> {
    users.set(req, await credentials.user(req));
  }

  function userOf(req: FastifyRequest): UserCredential {
    const cred = users.get(req);
    if (cred === undefined) throw ERRORS.invalidToken();
    return cred;
  }

  return {
    deps,
    config,
    sql,
    audit: (req) => auditContext(req, config),
    authRateLimit,
    anonymousGate,
    userGate,
    userOf,
    serviceRoleGate: credentials.requireRole('service_role'),
  };
}

// ── request parsing ─────────────────────────────────────────────────────────────────────

export function body<T>(b: T | undefined): T {
  if (b === undefined || b === null || typeof b !== 'object' || Array.isArray(b)) throw ERRORS.invalidBody();
  return b;
}

/** Logout and anonymous sign-in accept an absent body (docs/api/auth.md); a present one must be an object. */
export function optionalBody<T extends object>(b: unknown): Partial<T> {
  if (b === undefined) return {};
  return body(b as T);
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// ── sessions leaving ────────────────────────────────────────────────────────────────────

export function grant(g: q.SessionGrant): OkGrant {
  if (!isOkGrant(g)) throw new Error(`session grant without session: ${g.status}`);
  return g;
}

export function sendSession(reply: FastifyReply, status: number, session: Session | GoTrueSession): FastifyReply {
  // RFC 6749 §5.1: token responses must not be cached.
  return reply.code(status).header('cache-control', 'no-store').send(session);
}

/** The query of a link carrying a one-time token (`?token=…`). */
export interface TokenQuery {
  token?: unknown;
}
