/**
 * Signed URLs: tokens that let anyone holding them read one object until they expire, or
 * upload one object once. They are JWTs (HS256) bound to `<bucket>/<path>`, signed with a
 * key derived from the service's secret for this purpose alone, so a signed-URL token is
 * never an API credential and an API token never a signed URL.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import type { RequestContext } from '../core/db.ts';
import { AppError } from '../core/errors.ts';

/** Signed upload URLs are valid two hours (as Supabase's). */
export const UPLOAD_URL_SECONDS = 2 * 3600;
/** The longest `expiresIn` a signed URL may ask for: one year. */
export const MAX_EXPIRES_IN = 365 * 24 * 3600;

export const SIGN_ERRORS = {
  invalid: () => new AppError(400, 'invalid signature'),
  expired: () => new AppError(400, 'signature expired'),
  used: () => new AppError(403, 'signed upload url already used'),
} as const;

export interface UploadGrant {
  url: string;
  /** The signer, as the upload runs: its role and user id. */
  ctx: RequestContext;
  upsert: boolean;
  jti: string;
  expiresAt: Date;
}

export class Signer {
  readonly #key: Uint8Array;

  constructor(secret: string) {
    this.#key = new Uint8Array(createHmac('sha256', secret).update('plinth storage signed urls').digest());
  }

  #sign(claims: Record<string, unknown>, seconds: number): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt(now).setExpirationTime(now + seconds).sign(this.#key);
  }

  async #verify(token: unknown, purpose: string, url: string): Promise<Record<string, unknown>> {
    if (typeof token !== 'string' || token === '') throw SIGN_ERRORS.invalid();
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(token, this.#key, { algorithms: ['HS256'] }));
    } catch (err) {
      if (err instanceof joseErrors.JWTExpired) throw SIGN_ERRORS.expired();
      throw SIGN_ERRORS.invalid();
    }
    if (payload.purpose !== purpose || payload.url !== url || typeof payload.exp !== 'number') throw SIGN_ERRORS.invalid();
    return payload;
  }

  /** A download token for `<bucket>/<path>`, valid `seconds`; with `transform`, for that rendition only. */
  download(url: string, seconds: number, transform?: Record<string, unknown>): Promise<string> {
    return this.#sign(transform ? { url, purpose: 'download', transform } : { url, purpose: 'download' }, seconds);
  }

  /** Throws 400 unless `token` is a live download token for exactly `url`; returns the transformation it carries. */
  async verifyDownload(token: unknown, url: string): Promise<Record<string, unknown> | null> {
    const p = await this.#verify(token, 'download', url);
    return typeof p.transform === 'object' && p.transform !== null ? (p.transform as Record<string, unknown>) : null;
  }

  /** An upload token for `<bucket>/<path>`, run as `ctx` when used. */
  upload(url: string, ctx: RequestContext, upsert: boolean): Promise<string> {
    return this.#sign({ url, purpose: 'upload', role: ctx.role, sub: ctx.claimsObject.sub ?? null, upsert, jti: randomUUID() }, UPLOAD_URL_SECONDS);
  }

  async verifyUpload(token: unknown, url: string): Promise<UploadGrant> {
    const p = await this.#verify(token, 'upload', url);
    if (typeof p.role !== 'string' || typeof p.jti !== 'string') throw SIGN_ERRORS.invalid();
    const claims: Record<string, unknown> = { role: p.role };
    if (typeof p.sub === 'string') claims.sub = p.sub;
    return {
      url,
      ctx: { role: p.role, claims: JSON.stringify(claims), claimsObject: claims },
      upsert: p.upsert === true,
      jti: p.jti,
      expiresAt: new Date((p.exp as number) * 1000),
    };
  }
}
