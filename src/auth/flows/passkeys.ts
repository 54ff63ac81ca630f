/**
 * Passkeys (docs/api/auth.md, Passkeys): WebAuthn discoverable credentials, in GoTrue's
 * paths and shapes. A signed-in user registers one (registration/options, then
 * registration/verify with what `navigator.credentials.create()` answered), lists, renames
 * and deletes them; anyone signs in with one (authentication/options, then
 * authentication/verify with what `navigator.credentials.get()` answered) and gets a
 * session at aal1 with amr `passkey`.
 *
 * @simplewebauthn/server checks the ceremonies (origin, RP id, challenge, signature,
 * attestation); the state (challenges once and expiring, credentials, counters, the
 * session) is SQL's (sql/fixtures/auth/passkeys.sql). Anything wrong in what the browser
 * sent is 400 `passkey verification failed`, never a 500.
 */
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import type { Credential } from '../../core/credentials.ts';
import { AppError, ERRORS, unreachable } from '../../core/errors.ts';
import { AUTH_ERRORS } from '../errors.ts';
import { compatSession } from '../compat/shape.ts';
import { isOkGrant, sessionFromGrant } from '../sessions.ts';
import { newOpaqueToken } from '../tokens.ts';
import * as q from './passkeys-db.ts';
import { authRoom, isPlainObject, UUID, type AuthRoom } from './room.ts';

/**
 * @simplewebauthn/server, loaded on the first passkey request: with its X.509 and ASN.1
 * schemas it holds about 4 MB of heap (10 MB of RSS) that a service without passkeys never
 * needs (docs/performance.md, Memory).
 */
let webauthnLoad: Promise<typeof import('@simplewebauthn/server')> | null = null;
const webauthn = () => (webauthnLoad ??= import('@simplewebauthn/server'));

/** A challenge lives 5 minutes (GoTrue's WEBAUTHN_CHALLENGE_EXPIRY_DURATION); the browser's prompt as long. */
export const PASSKEY_CHALLENGE_SECONDS = 300;
/** GoTrue's default MAX_PASSKEYS_PER_USER. */
export const MAX_PASSKEYS_PER_USER = 10;

export const PASSKEY_ERRORS = {
  challengeNotFound: () => new AppError(400, 'passkey challenge not found or already used'),
  challengeExpired: () => new AppError(400, 'passkey challenge expired'),
  verificationFailed: () => new AppError(400, 'passkey verification failed'),
  invalidName: () => new AppError(400, 'friendly_name must be 1 to 120 characters'),
  guest: () => new AppError(403, 'guests cannot register passkeys'),
  aal2Required: () => new AppError(403, 'this needs a session verified with a second factor (aal2)'),
  notFound: () => new AppError(404, 'passkey not found'),
  taken: () => new AppError(409, 'passkey already registered'),
  tooMany: () => new AppError(422, 'too many passkeys'),
} as const;

/** The relying party: AUTH_PASSKEY_RP_ID and AUTH_PASSKEY_ORIGINS, or SITE_URL's host and origin. */
export function relyingParty(config: Deps['config']): { rpId: string; origins: string[] } {
  const site = new URL(config.siteUrl);
  return {
    rpId: config.passkeyRpId ?? site.hostname,
    origins: config.passkeyOrigins.length > 0 ? [...config.passkeyOrigins] : [site.origin],
  };
}

/** The options endpoints take no field of their own: an absent body or any object (auth-js sends captcha fields). */
function optionalObject(b: unknown): void {
  if (b !== undefined && b !== null && !isPlainObject(b)) throw ERRORS.invalidBody();
}

interface VerifyBody {
  challenge_id: string;
  credential: Record<string, unknown>;
  friendly_name?: string;
}

const verifySchema = {
  type: 'object',
  required: ['challenge_id', 'credential'],
  properties: { challenge_id: { type: 'string' }, credential: { type: 'object' }, friendly_name: { type: 'string' } },
} as const;
const renameSchema = { type: 'object', required: ['friendly_name'], properties: { friendly_name: { type: 'string' } } } as const;

function checkName(name: string | undefined): string | null {
  if (name === undefined) return null;
  if (name.length < 1 || name.length > 120) throw PASSKEY_ERRORS.invalidName();
  return name;
}

function aalOf(cred: Credential): string | null {
  return typeof cred.claimsObject.aal === 'string' ? cred.claimsObject.aal : null;
}

/** Consume a challenge (once, whatever follows) and return its bytes as the base64url the client data carries. */
async function takeChallenge(deps: Deps, id: string, kind: q.ChallengeKind, userId: string | null): Promise<string> {
  if (!UUID.test(id)) throw PASSKEY_ERRORS.challengeNotFound();
  const c = await q.consumeChallenge(deps.db.sql, id, kind, userId);
  switch (c.status) {
    case 'ok':
      return c.challenge!.toString('base64url');
    case 'not_found':
      throw PASSKEY_ERRORS.challengeNotFound();
    case 'expired':
      throw PASSKEY_ERRORS.challengeExpired();
    default:
      return unreachable(c.status);
  }
}

/** A ceremony check that fails (or input it cannot read) is the client's fault: 400, the reason in the log. */
async function verified<T>(req: FastifyRequest, what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    req.log.info({ reason: err instanceof Error ? err.message : String(err) }, `passkey ${what} refused`);
    throw PASSKEY_ERRORS.verificationFailed();
  }
}

const TRANSPORTS = new Set(['ble', 'cable', 'hybrid', 'internal', 'nfc', 'smart-card', 'usb']);

function transportsOf(credential: Record<string, unknown>): string[] {
  const r = credential.response;
  const list = isPlainObject(r) && Array.isArray(r.transports) ? r.transports : [];
  return list.filter((t): t is string => typeof t === 'string' && TRANSPORTS.has(t));
}

type Ctx = AuthRoom & { rpId: string; origins: string[] };

function challengeAnswer(c: q.ChallengeRow, options: unknown) {
  return { challenge_id: c.challenge_id, options, expires_at: Math.floor(c.expires_at!.getTime() / 1000) };
}

export function registerPasskeyRoutes(app: FastifyInstance, deps: Deps): void {
  const ctx: Ctx = { ...authRoom(deps), ...relyingParty(deps.config) };
  registration(app, ctx);
  signIn(app, ctx);
  management(app, ctx);
  administration(app, ctx);
}

// ── the service role (GoTrue's admin passkey endpoints) ──────────────────────────────────
function administration(app: FastifyInstance, { sql, audit, serviceRoleGate }: Ctx): void {
  app.get<{ Params: { id: string } }>('/auth/v1/admin/users/:id/passkeys', { onRequest: serviceRoleGate }, async (req, reply) => {
    if (!UUID.test(req.params.id)) throw AUTH_ERRORS.invalidUserId();
    const list = await q.listPasskeys(sql, req.params.id);
    if (list === null) throw AUTH_ERRORS.userNotFound();
    return reply.code(200).send(list);
  });

  app.delete<{ Params: { id: string; passkey_id: string } }>(
    '/auth/v1/admin/users/:id/passkeys/:passkey_id',
    { onRequest: serviceRoleGate },
    async (req, reply) => {
      if (!UUID.test(req.params.id)) throw AUTH_ERRORS.invalidUserId();
      if (!UUID.test(req.params.passkey_id)) throw PASSKEY_ERRORS.notFound();
      const status = await q.adminDeletePasskey(sql, req.params.id, req.params.passkey_id, audit(req));
      switch (status) {
        case 'ok':
          return reply.code(204).send();
        case 'not_found':
          throw PASSKEY_ERRORS.notFound();
        default:
          return unreachable(status);
      }
    },
  );
}

// ── registration (signed in) ──────────────────────────────────────────────────────────
function registration(app: FastifyInstance, { deps, sql, rpId, origins, userGate, userOf, audit }: Ctx): void {
  app.post('/auth/v1/passkeys/registration/options', { onRequest: userGate }, async (req, reply) => {
    optionalObject(req.body);
    const cred = userOf(req);
    const c = await q.issueChallenge(sql, 'registration', cred.userId, aalOf(cred), PASSKEY_CHALLENGE_SECONDS, MAX_PASSKEYS_PER_USER);
    switch (c.status) {
      case 'ok': {
        const options = await (await webauthn()).generateRegistrationOptions({
          rpName: rpId,
          rpID: rpId,
          userID: new Uint8Array(Buffer.from(cred.userId, 'utf8')),
          userName: c.user_name!,
          userDisplayName: c.user_display_name!,
          challenge: new Uint8Array(c.challenge!),
          timeout: PASSKEY_CHALLENGE_SECONDS * 1000,
          attestationType: 'none',
          excludeCredentials: c.exclude!.map((id) => ({ id: Buffer.from(id).toString('base64url') })),
          authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' },
        });
        return reply.code(200).header('cache-control', 'no-store').send(challengeAnswer(c, options));
      }
      case 'user_not_found':
        throw AUTH_ERRORS.userNotFound();
      case 'anonymous':
        throw PASSKEY_ERRORS.guest();
      case 'aal2_required':
        throw PASSKEY_ERRORS.aal2Required();
      case 'too_many':
        throw PASSKEY_ERRORS.tooMany();
      default:
        return unreachable(c.status);
    }
  });

  app.post<{ Body: VerifyBody }>(
    '/auth/v1/passkeys/registration/verify',
    { schema: { body: verifySchema }, onRequest: userGate },
    async (req, reply) => {
      const cred = userOf(req);
      const b = req.body;
      const name = checkName(b.friendly_name);
      const challenge = await takeChallenge(deps, b.challenge_id, 'registration', cred.userId);
      const info = await verified(req, 'registration', async () => {
        const r = await (await webauthn()).verifyRegistrationResponse({
          response: b.credential as unknown as RegistrationResponseJSON,
          expectedChallenge: challenge,
          expectedOrigin: origins,
          expectedRPID: rpId,
          requireUserVerification: false,
        });
        if (!r.verified) throw new Error('not verified');
        return r.registrationInfo;
      });
      const r = await q.registerPasskey(sql, {
        userId: cred.userId,
        credentialId: Buffer.from(info.credential.id, 'base64url'),
        publicKey: Buffer.from(info.credential.publicKey),
        signCount: info.credential.counter,
        transports: transportsOf(b.credential),
        friendlyName: name,
        aaguid: UUID.test(info.aaguid) && !/^[0-]+$/.test(info.aaguid) ? info.aaguid : null,
        backupEligible: info.credentialDeviceType === 'multiDevice',
        backedUp: info.credentialBackedUp,
        maxPasskeys: MAX_PASSKEYS_PER_USER,
        context: audit(req),
      });
      switch (r.status) {
        case 'ok':
          return reply.code(200).send(r.passkey);
        case 'user_not_found':
          throw AUTH_ERRORS.userNotFound();
        case 'too_many':
          throw PASSKEY_ERRORS.tooMany();
        case 'credential_taken':
          throw PASSKEY_ERRORS.taken();
        default:
          return unreachable(r.status);
      }
    },
  );
}

// ── sign-in (no credential needed) ────────────────────────────────────────────────────
function signIn(app: FastifyInstance, { deps, sql, rpId, origins, authRateLimit, audit }: Ctx): void {
  const { config } = deps;
  app.post('/auth/v1/passkeys/authentication/options', { onRequest: authRateLimit }, async (req, reply) => {
    optionalObject(req.body);
    const c = await q.issueChallenge(sql, 'authentication', null, null, PASSKEY_CHALLENGE_SECONDS, MAX_PASSKEYS_PER_USER);
    if (c.status !== 'ok') throw new Error(`authentication challenge: ${c.status}`);
    // Discoverable credentials: no allowCredentials, so the answer tells nothing about any account.
    const options = await (await webauthn()).generateAuthenticationOptions({
      rpID: rpId,
      challenge: new Uint8Array(c.challenge!),
      timeout: PASSKEY_CHALLENGE_SECONDS * 1000,
      userVerification: 'preferred',
    });
    return reply.code(200).header('cache-control', 'no-store').send(challengeAnswer(c, options));
  });

  app.post<{ Body: VerifyBody }>(
    '/auth/v1/passkeys/authentication/verify',
    { schema: { body: verifySchema }, onRequest: authRateLimit },
    async (req, reply) => {
      const b = req.body;
      const challenge = await takeChallenge(deps, b.challenge_id, 'authentication', null);
      const response = b.credential as unknown as AuthenticationResponseJSON;
      const credentialId = typeof response.id === 'string' ? Buffer.from(response.id, 'base64url') : Buffer.alloc(0);
      if (credentialId.length === 0 || credentialId.length > 1023) throw PASSKEY_ERRORS.verificationFailed();
      const stored = await q.passkeyForCredential(sql, credentialId);
      if (stored.status !== 'ok') {
        req.log.info('passkey sign-in refused: unknown credential');
        throw PASSKEY_ERRORS.verificationFailed();
      }
      const info = await verified(req, 'sign-in', async () => {
        // The user handle the authenticator keeps must name the passkey's user.
        const handle = isPlainObject(b.credential.response) ? b.credential.response.userHandle : undefined;
        if (typeof handle !== 'string' || Buffer.from(handle, 'base64url').toString('utf8') !== stored.user_id) throw new Error('user handle mismatch');
        const r = await (await webauthn()).verifyAuthenticationResponse({
          response,
          expectedChallenge: challenge,
          expectedOrigin: origins,
          expectedRPID: rpId,
          credential: {
            id: credentialId.toString('base64url'),
            publicKey: new Uint8Array(stored.public_key!),
            // The counter rule is SQL's (auth.passkey_sign_in: under the row lock, audited): 0 turns the library's off.
            counter: 0,
            transports: (stored.transports ?? []),
          },
          requireUserVerification: false,
        });
        if (!r.verified) throw new Error('not verified');
        return r.authenticationInfo;
      });
      const refresh = newOpaqueToken();
      const g = await q.passkeySignIn(sql, stored.passkey_id!, info.newCounter, refresh.hash, config.refreshTokenTtl, audit(req));
      switch (g.status) {
        case 'ok': {
          if (!isOkGrant(g)) throw new Error('passkey grant without session');
          const session = await sessionFromGrant(deps, g, refresh.token, 'passkey');
          return send(reply, config.supabaseCompat ? await compatSession(deps, session) : session);
        }
        case 'not_found':
        case 'counter':
          throw PASSKEY_ERRORS.verificationFailed();
        case 'user_not_found':
          throw AUTH_ERRORS.userNotFound();
        default:
          return unreachable(g.status);
      }
    },
  );
}

// ── the signed-in user's passkeys ─────────────────────────────────────────────────────
function management(app: FastifyInstance, { sql, userGate, userOf, audit }: Ctx): void {
  app.get('/auth/v1/passkeys', { onRequest: userGate }, async (req, reply) => {
    const list = await q.listPasskeys(sql, userOf(req).userId);
    if (list === null) throw AUTH_ERRORS.userNotFound();
    return reply.code(200).send(list);
  });

  app.patch<{ Params: { id: string }; Body: { friendly_name: string } }>(
    '/auth/v1/passkeys/:id',
    { schema: { body: renameSchema }, onRequest: userGate },
    async (req, reply) => {
      const cred = userOf(req);
      if (!UUID.test(req.params.id)) throw PASSKEY_ERRORS.notFound();
      const r = await q.renamePasskey(sql, cred.userId, req.params.id, checkName(req.body.friendly_name)!, audit(req));
      switch (r.status) {
        case 'ok':
          return reply.code(200).send(r.passkey);
        case 'not_found':
          throw PASSKEY_ERRORS.notFound();
        default:
          return unreachable(r.status);
      }
    },
  );

  app.delete<{ Params: { id: string } }>('/auth/v1/passkeys/:id', { onRequest: userGate }, async (req, reply) => {
    const cred = userOf(req);
    if (!UUID.test(req.params.id)) throw PASSKEY_ERRORS.notFound();
    const status = await q.deletePasskey(sql, cred.userId, req.params.id, aalOf(cred), audit(req));
    switch (status) {
      case 'ok':
        return reply.code(204).send();
      case 'not_found':
        throw PASSKEY_ERRORS.notFound();
      case 'aal2_required':
        throw PASSKEY_ERRORS.aal2Required();
      default:
        return unreachable(status);
    }
  });
}

function send(reply: FastifyReply, session: object): FastifyReply {
  // RFC 6749 §5.1: token responses must not be cached.
  return reply.code(200).header('cache-control', 'no-store').send(session);
}
