/**
 * Credentials → {role, claims} (docs/api/overview.md).
 *
 * - `Authorization: Bearer` first: the anon key, the service-role key or a user access
 *   token. A bearer token that fails verification is 401 `invalid or expired token`,
 *   whatever `apikey` says.
 * - Then `apikey`, honoured only for a token whose role is `anon` or `service_role`.
 * - A verified token whose role is not one of the four API roles is refused (401).
 * - No credential: development mode (no JWT_SECRET) passes as anon; otherwise the
 *   caller decides (REST and friends answer 401 `missing credentials`).
 *
 * Verified tokens are cached (bounded) so the hot path verifies each token once.
 */
import { setRequestCaller } from './request-role.ts';
import { jwtVerify, errors as joseErrors } from 'jose';
import type { FastifyRequest } from 'fastify';
import type { RuntimeConfig } from './config.ts';
import type { RequestContext } from './db.ts';
import { AppError, ERRORS } from './errors.ts';

export interface Credential extends RequestContext {
  /** The verified token; null for the development-mode pass-through. */
  token: string | null;
  /** `sub` claim: the user id, for user access tokens only. */
  userId: string | null;
  /** Seconds since the epoch at which the credential stops being valid. */
  exp: number;
}

const CACHE_LIMIT = 10_000;

/**
 * Whether a user token with the role service_role at this `aal` may pass a service-role
 * route (sql/fixtures/auth/admin_aal.sql: aal2, or no verified factor on the account).
 */
export type AdminAalCheck = (userId: string, aal: string | null) => Promise<boolean>;

export class Credentials {
  readonly anonymous: Credential;
  private readonly key: Uint8Array;
  private readonly roles: ReadonlySet<string>;
  private readonly devMode: boolean;
  private readonly cache = new Map<string, Credential>();
  private readonly adminAalOk: AdminAalCheck | null;

  /** `adminAalOk` null: every service_role token passes (tests of the gate alone). */
  constructor(config: RuntimeConfig, adminAalOk: AdminAalCheck | null = null) {
    this.adminAalOk = adminAalOk;
    this.key = new TextEncoder().encode(config.secret);
    this.roles = new Set(['anon', 'authenticated', 'service_role', config.anonymousRole]);
    this.devMode = config.devMode;
    this.anonymous = Object.freeze({
      role: 'anon',
      claims: '{"role":"anon"}',
      claimsObject: Object.freeze({ role: 'anon' }),
      token: null,
      userId: null,
      exp: Number.POSITIVE_INFINITY,
    });
  }

  /** A token verified before, from the cache; undefined when it was not seen yet. Throws when it has expired. */
  #cached(token: string): Credential | undefined {
    const hit = this.cache.get(token);
    if (hit === undefined) return undefined;
    if (hit.exp > Date.now() / 1000) return hit;
    this.cache.delete(token);
    throw ERRORS.invalidToken();
  }

  /** Verify a JWT; throws 401 `invalid or expired token`. */
  async verify(token: string): Promise<Credential> {
    const hit = this.#cached(token);
    if (hit !== undefined) return hit;
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(token, this.key, { algorithms: ['HS256'] }));
    } catch (err) {
      if (err instanceof joseErrors.JOSEError || err instanceof TypeError) throw new AppError(401, 'invalid or expired token', { cause: err });
      throw err;
    }
    const role = payload.role;
    if (typeof role !== 'string' || !this.roles.has(role)) throw ERRORS.invalidToken();
    const sub = typeof payload.sub === 'string' ? payload.sub : null;
    // A user token (one with `sub`) without `exp` would never expire: every one plinth signs
    // carries `exp`, so such a token was made by hand with the secret, and it is refused.
    if (payload.sub !== undefined && typeof payload.exp !== 'number') throw ERRORS.invalidToken();
    // The anon and service-role keys carry `role` alone: their claims are `{"role": …}` (docs/api/overview.md).
    let claimsObject: Record<string, unknown> = payload;
    if (sub === null) {
      const { iat: _iat, exp: _exp, ...rest } = payload;
      claimsObject = rest;
    }
    const cred: Credential = Object.freeze({
      role,
      claims: JSON.stringify(claimsObject),
      claimsObject: Object.freeze(claimsObject),
      token,
      userId: sub,
      exp: typeof payload.exp === 'number' ? payload.exp : Number.POSITIVE_INFINITY,
    });
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(token, cred);
    return cred;
  }

  /**
   * A token's credential, or null when it does not verify (for a check that drops a header
   * rather than refuses the request): without a promise when it was verified before.
   */
  check(token: string): Credential | null | Promise<Credential | null> {
    let hit: Credential | undefined;
    try {
      hit = this.#cached(token);
    } catch {
      return null;
    }
    return hit ?? this.verify(token).catch(() => null);
  }

  /**
   * The credential a request carries, or null when it carries none: without a promise when
   * its token was verified before (the hot path: every request of a client after its first).
   */
  #fromHeaders(headers: FastifyRequest['headers']): Credential | null | Promise<Credential> {
    const authorization = headers.authorization;
    if (authorization !== undefined && authorization !== '') {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
      if (!m) throw ERRORS.invalidToken();
      return this.#cached(m[1]) ?? this.verify(m[1]);
    }
    const apikey = headers.apikey;
    if (typeof apikey === 'string' && apikey !== '') {
      const hit = this.#cached(apikey);
      return hit !== undefined ? apikeyOnly(hit) : this.verify(apikey).then(apikeyOnly);
    }
    return null;
  }

  /** The credential a request carries, or null when it carries none. */
  async fromHeaders(headers: FastifyRequest['headers']): Promise<Credential | null> {
    return this.#fromHeaders(headers);
  }

  /**
   * REST, RPC, batch, storage and functions: a credential, or anon in development mode,
   * carrying the request's id (for SQL's `request.id`).
   */
  api(req: FastifyRequest): Credential | Promise<Credential> {
    const cred = this.#fromHeaders(req.headers);
    if (cred instanceof Promise) return cred.then((c) => this.aalChecked(forRequest(req, this.#orAnonymous(c))));
    return this.aalChecked(forRequest(req, this.#orAnonymous(cred)));
  }

  /**
   * An admin account's token (a user's, role service_role) below aal2 whose account has a
   * verified factor is refused, 403 `insufficient_aal` (sql/fixtures/auth/admin_aal.sql):
   * the password alone must not act as the service role. Every other credential (the keys
   * included) passes as it is, without a promise and without asking the database.
   */
  aalChecked(cred: Credential): Credential | Promise<Credential> {
    if (cred.role !== 'service_role' || cred.userId === null || this.adminAalOk === null) return cred;
    const aal = typeof cred.claimsObject.aal === 'string' ? cred.claimsObject.aal : null;
    if (aal === 'aal2') return cred;
    return this.adminAalOk(cred.userId, aal).then((ok) => {
      if (!ok) throw ERRORS.insufficientAal();
      return cred;
    });
  }

  #orAnonymous(cred: Credential | null): Credential {
    if (cred !== null) return cred;
    if (this.devMode) return this.anonymous;
    throw ERRORS.missingCredentials();
  }

  /** Level JWT (`/auth/v1/user`, logout): a user access token with `sub`. */
  async user(req: FastifyRequest): Promise<Credential & { userId: string }> {
    const cred = await this.fromHeaders(req.headers);
    if (cred === null || cred.userId === null) throw ERRORS.invalidToken();
    setRequestCaller(req.raw, cred);
    return cred as Credential & { userId: string };
  }

  /**
   * The `onRequest` hook of a route only the service role may call (`{ onRequest:
   * credentials.requireRole('service_role') }`): the service-role key, or any token whose
   * role is service_role. None: 401 `missing credentials`; another role's: 403 `service role
   * required` (docs/decisions/0008-service-role-endpoints-401-then-403.md). It runs before
   * the body is read (docs/decisions/0100-the-role-is-judged-before-the-body.md); the
   * handler takes the credential with `gatedCredential(req)`.
   *
   * A user's token (one with `sub`, an admin account's) below aal2 passes only when the
   * account has no verified factor, which the database decides (403 `insufficient_aal`
   * otherwise): the service-role key has no user and never asks.
   */
  requireRole(role: 'service_role'): (req: FastifyRequest) => Promise<void> {
    return async (req) => {
      const cred = await this.fromHeaders(req.headers);
      if (cred === null) throw ERRORS.missingCredentials();
      setRequestCaller(req.raw, cred);
      if (cred.role !== role) throw ERRORS.serviceRoleRequired();
      gated.set(req, await this.aalChecked(cred));
    };
  }

  /**
   * The hook of a route any API caller may call (`{ preHandler: credentials.caller }`): sets
   * the request's credential once, as `api(req)` decides it (401 without one outside
   * development mode, the admin aal check); the handler takes it with `gatedCredential(req)`.
   * Calling it again on the same request does nothing (a route that hands a request on to
   * another route's handler calls it before).
   */
  readonly caller = async (req: FastifyRequest): Promise<void> => {
    if (gated.has(req)) return;
    gated.set(req, await this.api(req));
  };
}

/** The credential each request was let through with by its route's hook (`requireRole` or `caller`). */
const gated = new WeakMap<FastifyRequest, Credential>();

/** The credential the route's hook (`requireRole`, `caller`) let this request through with; a route without one has none (a bug, thrown). */
export function gatedCredential(req: FastifyRequest): Credential {
  const cred = gated.get(req);
  if (cred === undefined) throw new Error('gatedCredential: the route has no credential hook');
  return cred;
}

/** The credential of one request: the shared (cached) one, with this request's id. */
function forRequest(req: FastifyRequest, c: Credential): Credential {
  setRequestCaller(req.raw, c);
  return { role: c.role, claims: c.claims, claimsObject: c.claimsObject, token: c.token, userId: c.userId, exp: c.exp, requestId: req.id };
}

/** apikey is honoured only for the anon and service-role keys (docs/api/overview.md). */
function apikeyOnly(cred: Credential): Credential {
  if (cred.role === 'anon' || cred.role === 'service_role') return cred;
  throw ERRORS.invalidToken();
}
