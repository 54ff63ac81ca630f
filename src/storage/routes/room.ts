/**
 * What every storage route shares: the area's parts (database, back end, image cache,
 * signer, byte counters), the credential hooks, the URL prefixes, and the rule that lets a
 * bucket named like one of Supabase's words keep its seed routes.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import type { RequestContext } from '../../core/db.ts';
import type { Backend } from '../backends/backend.ts';
import { jsonBody } from '../body.ts';
import { Signer } from '../signed.ts';
import type { ImageCache } from '../transform.ts';

export const OBJECT_PREFIX = '/storage/v1/object/';
export const LIST_PREFIX = '/storage/v1/object/list/';
export const INFO_PREFIX = '/storage/v1/object/info/';
export const PUBLIC_PREFIX = '/storage/v1/object/public/';
export const AUTHENTICATED_PREFIX = '/storage/v1/object/authenticated/';
export const SIGN_PREFIX = '/storage/v1/object/sign/';
export const UPLOAD_SIGN_PREFIX = '/storage/v1/object/upload/sign/';
export const BUCKET_PREFIX = '/storage/v1/bucket/';
export const RENDER_PREFIX = '/storage/v1/render/image/';

/** Signed URLs are served with the service role's sight: the token is the permission. */
export const SERVICE: RequestContext = Object.freeze({ role: 'service_role', claims: '{"role":"service_role"}', claimsObject: Object.freeze({ role: 'service_role' }) });

export type Handler = (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
type Hook = (req: FastifyRequest) => Promise<void>;

export interface Room {
  readonly deps: Deps;
  readonly db: Deps['db'];
  readonly log: Deps['log'];
  readonly backend: Backend;
  readonly images: ImageCache;
  readonly signer: Signer;
  readonly uploaded: { inc(n: number): void };
  readonly downloaded: { inc(n: number): void };
  /** preHandler: the caller's credential, set once (`gatedCredential(req)` in the handler). */
  readonly caller: Hook;
  /** onRequest: only the service role, judged before the body is read. */
  readonly serviceRole: Hook;
  /** A JSON object body in the raw scope (MAX_BODY_BYTES). */
  json(req: FastifyRequest): Promise<Record<string, unknown>>;
}

export function makeRoom(deps: Deps, backend: Backend, images: ImageCache): Room {
  const { db, credentials, log, metrics, config } = deps;
  return {
    deps,
    db,
    log,
    backend,
    images,
    signer: new Signer(config.secret),
    uploaded: metrics.storageBytes.labels('upload', config.storageBackend),
    downloaded: metrics.storageBytes.labels('download', config.storageBackend),
    caller: credentials.caller,
    serviceRole: credentials.requireRole('service_role'),
    json: (req) => jsonBody(req, config.maxBodyBytes),
  };
}

/**
 * The Supabase routes under /object/<word>/… (public, authenticated, sign, info, list,
 * upload) would hide a bucket of that name from the seed's /object/{bucket}/… routes:
 * while a bucket of that name exists, the seed's route serves the request (with the
 * caller's credential, which every seed route takes).
 */
export function unlessBucket(room: Room, word: string, seed: Handler, handler: Handler): Handler {
  return async (req, reply) => {
    const [r] = await room.db.sql<{ taken: boolean }[]>`select exists (select 1 from storage.buckets where id = ${word}) as taken`;
    if (!r.taken) return handler(req, reply);
    await room.caller(req);
    return seed(req, reply);
  };
}

/** `x-upsert: true`. */
export function upsertAsked(req: FastifyRequest): boolean {
  return String(req.headers['x-upsert'] ?? '').toLowerCase() === 'true';
}
