/**
 * Token material (docs/api/overview.md, docs/architecture.md):
 * - opaque tokens (refresh tokens and emailed one-time tokens): 32 random bytes (256 bits),
 *   base64url; the database only ever sees their SHA-256;
 * - sealing of emailed tokens for the job payload: AES-256-GCM with a key derived from the
 *   JWT secret by HKDF-SHA256, so no table or job row holds a clear token;
 * - access tokens: HS256 JWTs (signed here with node:crypto's HMAC; verified with jose).
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';

export interface OpaqueToken {
  /** What the client holds. */
  token: string;
  /** SHA-256 of the token: what the database stores. */
  hash: Buffer;
}

export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/**
 * The 6-digit code's hash: over the address and the code, so that it names one address;
 * after a 0xff byte, which no UTF-8 text holds, so that no token any route hashes
 * (`hashToken`: /magiclink/verify, /recover/confirm, `token_hash`) can ever equal it and
 * reach a code past the per-address limit on tries.
 */
export function codeHash(email: string, code: string): Buffer {
  return createHash('sha256').update(Buffer.from([0xff])).update(`otp:${email.toLowerCase()}:${code}`, 'utf8').digest();
}

export function newOpaqueToken(): OpaqueToken {
  const token = randomBytes(32).toString('base64url');
  return { token, hash: hashToken(token) };
}

const sealKeys = new Map<string, Buffer>();

function sealKey(secret: string): Buffer {
  let key = sealKeys.get(secret);
  if (key === undefined) {
    key = Buffer.from(hkdfSync('sha256', secret, 'plinth', 'plinth auth email token seal v1', 32));
    sealKeys.set(secret, key);
  }
  return key;
}

/** AES-256-GCM: base64url(iv ‖ ciphertext ‖ tag). */
export function seal(secret: string, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealKey(secret), iv);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url');
}

/** Inverse of `seal`; throws when the text was not sealed with this secret. */
export function unseal(secret: string, sealed: string): string {
  const raw = Buffer.from(sealed, 'base64url');
  if (raw.length < 12 + 16) throw new Error('sealed token too short');
  const decipher = createDecipheriv('aes-256-gcm', sealKey(secret), raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(raw.length - 16));
  return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString('utf8');
}

const mfaKeys = new Map<string, Buffer>();

/**
 * The key TOTP secrets are encrypted under in the database (mfa.sql): 32 bytes derived by
 * HKDF-SHA256 from MFA_ENCRYPTION_KEY, or from the JWT secret when that is unset.
 */
export function mfaKey(secret: string): Buffer {
  let key = mfaKeys.get(secret);
  if (key === undefined) {
    key = Buffer.from(hkdfSync('sha256', secret, 'plinth', 'plinth auth mfa secret v1', 32));
    mfaKeys.set(secret, key);
  }
  return key;
}

export interface AccessTokenClaims {
  sub: string;
  role: string;
  email: string | null;
  /** Users with a phone number only (E.164). */
  phone?: string;
  session_id: string;
  is_anonymous: boolean;
  /** aal1, or aal2 once the session verified a second factor. */
  aal: 'aal1' | 'aal2';
  /** The methods that authenticated the session, oldest first. */
  amr: { method: string; timestamp: number }[];
  /** What an admin set, with `provider` and `providers` (auth_private.app_metadata). */
  app_metadata: Record<string, unknown>;
}

/** The JOSE header of every token signed here, base64url, with its dot. */
const HS256_HEADER = `${Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url')}.`;

/** An HS256 access token with the claims of docs/api/overview.md, valid `ttl` seconds. */
export async function signAccessToken(secret: string, claims: AccessTokenClaims, ttl: number, now = Math.floor(Date.now() / 1000)): Promise<string> {
  return signClaims(secret, accessTokenClaims(claims, ttl, now));
}

/** The whole payload signAccessToken would sign: what the access-token hook is shown. */
export function accessTokenClaims(claims: AccessTokenClaims, ttl: number, now = Math.floor(Date.now() / 1000)): Record<string, unknown> {
  return {
    sub: claims.sub,
    role: claims.role,
    email: claims.email,
    ...(claims.phone === undefined ? {} : { phone: claims.phone }),
    aud: 'authenticated',
    session_id: claims.session_id,
    is_anonymous: claims.is_anonymous,
    aal: claims.aal,
    amr: claims.amr,
    app_metadata: claims.app_metadata,
    iat: now,
    exp: now + ttl,
  };
}

/**
 * Sign a payload as it is (the hook's answer: sub, iat and exp are among its claims): the
 * bytes jose's SignJWT gives (the same header, JSON.stringify of the payload), by one
 * synchronous HMAC: about 6 µs of CPU against jose's 60 (WebCrypto's job on the thread
 * pool, a copy of the claims), a tenth of the service's CPU per refresh (bench: token-refresh).
 */
export async function signClaims(secret: string, payload: Record<string, unknown>): Promise<string> {
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) throw new TypeError('JWT Claims Set MUST be an object');
  for (const claim of ['iat', 'nbf', 'exp']) {
    const value = payload[claim];
    if (typeof value === 'number' && !Number.isFinite(value)) throw new TypeError(`"${claim}" claim must be a finite number`);
  }
  const input = HS256_HEADER + Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
}
