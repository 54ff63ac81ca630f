/**
 * Objects (raw scope: no body parser runs): downloads (the caller's, a public bucket's, a
 * signed URL's), signing, info, listing, copy, move and delete.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { gatedCredential } from '../../core/credentials.ts';
import { AppError, ERRORS } from '../../core/errors.ts';
import { sendJsonText } from '../../core/http.ts';
import * as sdb from '../db.ts';
import { serve } from '../download.ts';
import { STORAGE_ERRORS } from '../errors.ts';
import { invalidObjectPath, objectNameOk, parseBucketId, parseObjectPath, rawPath } from '../paths.ts';
import { MAX_EXPIRES_IN } from '../signed.ts';
import { parseTransform } from '../transform.ts';
import { copyOrMove, removeBytes } from '../upload.ts';
import { AUTHENTICATED_PREFIX, INFO_PREFIX, LIST_PREFIX, OBJECT_PREFIX, PUBLIC_PREFIX, SERVICE, SIGN_PREFIX, unlessBucket, type Handler, type Room } from './room.ts';
import { uploadObject } from './uploads.ts';

async function download(room: Room, req: FastifyRequest, reply: FastifyReply, prefix = OBJECT_PREFIX): Promise<unknown> {
  const cred = gatedCredential(req);
  const { bucket, name } = parseObjectPath(req.url, prefix);
  return serve(room, req, reply, bucket, name, () => sdb.getObject(room.db, cred, bucket, name));
}

/** A public bucket's objects, to anyone, whatever the policies. */
async function downloadPublic(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const { bucket, name } = parseObjectPath(req.url, PUBLIC_PREFIX);
  return serve(room, req, reply, bucket, name, () => sdb.getPublicObject(room.db, bucket, name));
}

async function downloadSigned(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const { bucket, name } = parseObjectPath(req.url, SIGN_PREFIX);
  await room.signer.verifyDownload((req.query as Record<string, unknown>).token, `${bucket}/${name}`);
  return serve(room, req, reply, bucket, name, () => sdb.getObject(room.db, SERVICE, bucket, name));
}

/** Several paths of one bucket: an entry each, with an error for those the caller cannot read. */
async function signMany(room: Room, req: FastifyRequest, body: Record<string, unknown>, expiresIn: number): Promise<unknown[]> {
  const bucket = parseBucketId(req.url, SIGN_PREFIX, invalidObjectPath);
  const paths = body.paths;
  if (!Array.isArray(paths) || paths.length > 1000 || !paths.every((p) => typeof p === 'string')) throw ERRORS.invalidBody();
  const valid = paths.filter(objectNameOk);
  const visible = await sdb.visibleObjects(room.db, gatedCredential(req), bucket, valid);
  const out = [];
  for (const p of paths) {
    if (!visible.has(p)) {
      out.push({ error: 'object not found', path: p, signedURL: null });
      continue;
    }
    const token = await room.signer.download(`${bucket}/${p}`, expiresIn);
    out.push({ error: null, path: p, signedURL: `/object/sign/${bucket}/${p}?token=${token}` });
  }
  return out;
}

async function signDownload(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const path = rawPath(req.url).slice(SIGN_PREFIX.length);
  const body = await room.json(req);
  const expiresIn = body.expiresIn;
  if (typeof expiresIn !== 'number' || !Number.isSafeInteger(expiresIn) || expiresIn < 1 || expiresIn > MAX_EXPIRES_IN) {
    throw ERRORS.invalidBody();
  }
  if (!path.includes('/')) return reply.code(200).send(await signMany(room, req, body, expiresIn));
  const { bucket, name } = parseObjectPath(req.url, SIGN_PREFIX);
  const meta = await sdb.getObject(room.db, cred, bucket, name);
  if (meta.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
  if (meta.status === 'not_found') throw STORAGE_ERRORS.objectNotFound();
  if (typeof body.transform === 'object' && body.transform !== null && Object.keys(body.transform).length > 0) {
    // A signed rendition: the token carries the transformation (checked now), the URL is the render route.
    const transform = body.transform as Record<string, unknown>;
    parseTransform(transform);
    const token = await room.signer.download(`${bucket}/${name}`, expiresIn, transform);
    return reply.code(200).send({ signedURL: `/render/image/sign/${bucket}/${name}?token=${token}` });
  }
  const token = await room.signer.download(`${bucket}/${name}`, expiresIn);
  return reply.code(200).send({ signedURL: `/object/sign/${bucket}/${name}?token=${token}` });
}

async function objectInfo(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const { bucket, name } = parseObjectPath(req.url, INFO_PREFIX);
  const r = await sdb.objectInfo(room.db, cred, bucket, name);
  if (r.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
  if (r.status === 'not_found') throw STORAGE_ERRORS.objectNotFound();
  return sendJsonText(reply, 200, r.body!);
}

/** The seed's listing: every object under `?prefix=`. */
async function listObjects(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const bucket = parseBucketId(req.url, LIST_PREFIX, () => new AppError(400, 'invalid object path'));
  const q = req.query as Record<string, unknown>;
  const prefix = q.prefix ?? '';
  if (typeof prefix !== 'string') throw ERRORS.invalidRequest();
  const r = await sdb.listObjects(room.db, cred, bucket, prefix);
  if (r.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
  return sendJsonText(reply, 200, r.body);
}

/** storage-js `list`: one folder level, searched, sorted and paged. */
async function listFolder(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const bucket = parseBucketId(req.url, LIST_PREFIX, invalidObjectPath);
  const b = await room.json(req);
  const sortBy = (b.sortBy ?? {}) as Record<string, unknown>;
  const q = {
    prefix: b.prefix ?? '',
    limit: b.limit ?? 100,
    offset: b.offset ?? 0,
    search: b.search ?? '',
    sortColumn: sortBy.column ?? 'name',
    sortOrder: sortBy.order ?? 'asc',
  };
  if (
    typeof sortBy !== 'object' ||
    typeof q.prefix !== 'string' ||
    typeof q.search !== 'string' ||
    typeof q.sortColumn !== 'string' ||
    typeof q.sortOrder !== 'string' ||
    !/^(asc|desc)$/i.test(q.sortOrder) ||
    !(Number.isSafeInteger(q.limit) && (q.limit as number) >= 0 && (q.limit as number) <= 10_000) ||
    !(Number.isSafeInteger(q.offset) && (q.offset as number) >= 0)
  ) {
    throw ERRORS.invalidBody();
  }
  const r = await sdb.listFolder(room.db, cred, bucket, q as sdb.ListFolder);
  if (r.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
  if (r.status === 'invalid_sort') throw ERRORS.invalidBody();
  return sendJsonText(reply, 200, r.body!);
}

async function copyObject(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const r = await copyOrMove(room, req, gatedCredential(req), false);
  return reply.code(200).send({ Id: r.id, Key: r.key });
}

async function moveObject(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  await copyOrMove(room, req, gatedCredential(req), true);
  return reply.code(200).send({ message: 'object moved' });
}

/** storage-js `remove(paths)`: DELETE /object/{bucket} with {prefixes}; the deleted objects back. */
async function deleteObjects(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const bucket = parseBucketId(req.url, OBJECT_PREFIX, invalidObjectPath);
  const b = await room.json(req);
  const names = b.prefixes;
  if (!Array.isArray(names) || names.length > 1000 || !names.every((n) => typeof n === 'string')) throw ERRORS.invalidBody();
  const r = await sdb.deleteObjects(room.db, gatedCredential(req), bucket, names.filter(objectNameOk));
  if (r.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
  const gone = JSON.parse(r.body!) as { id: string; name: string }[];
  for (const g of gone) await removeBytes(room, { bucket, name: g.name, id: g.id }, 'deleted');
  return sendJsonText(reply, 200, r.body!);
}

async function deleteObject(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  if (!rawPath(req.url).slice(OBJECT_PREFIX.length).includes('/')) return deleteObjects(room, req, reply);
  const { bucket, name } = parseObjectPath(req.url, OBJECT_PREFIX);
  const r = await sdb.deleteObject(room.db, gatedCredential(req), bucket, name);
  switch (r.status) {
    case 'ok':
      break;
    case 'bucket_not_found':
      throw STORAGE_ERRORS.bucketNotFound();
    case 'not_found':
      throw STORAGE_ERRORS.objectNotFound();
    case 'forbidden':
      throw ERRORS.permissionDenied();
    default:
      return r.status satisfies never;
  }
  await removeBytes(room, { bucket, name, id: r.id! }, 'deleted');
  return reply.code(200).send({ message: 'object deleted' });
}

/** In the raw scope (no body parser). */
export function registerObjectRoutes(scope: FastifyInstance, room: Room): void {
  const { caller } = room;
  const on = (fn: (room: Room, req: FastifyRequest, reply: FastifyReply) => Promise<unknown>): Handler => (req, reply) => fn(room, req, reply);
  const seedDownload = on(download);
  const upload = on(uploadObject);
  const GET = ['GET', 'HEAD'] as const;
  scope.route({ method: [...GET], url: '/storage/v1/object/*', preHandler: caller, handler: seedDownload });
  scope.route({
    method: [...GET],
    url: '/storage/v1/object/authenticated/*',
    preHandler: caller,
    handler: unlessBucket(room, 'authenticated', seedDownload, (req, reply) => download(room, req, reply, AUTHENTICATED_PREFIX)),
  });
  scope.route({ method: [...GET], url: '/storage/v1/object/public/*', handler: unlessBucket(room, 'public', seedDownload, on(downloadPublic)) });
  scope.route({ method: [...GET], url: '/storage/v1/object/sign/*', handler: unlessBucket(room, 'sign', seedDownload, on(downloadSigned)) });
  scope.post('/storage/v1/object/sign/*', { preHandler: caller }, unlessBucket(room, 'sign', upload, on(signDownload)));
  scope.get('/storage/v1/object/info/*', { preHandler: caller }, unlessBucket(room, 'info', seedDownload, on(objectInfo)));
  scope.get('/storage/v1/object/list/*', { preHandler: caller }, on(listObjects));
  scope.post('/storage/v1/object/list/*', { preHandler: caller }, unlessBucket(room, 'list', upload, on(listFolder)));
  scope.post('/storage/v1/object/copy', { preHandler: caller }, on(copyObject));
  scope.post('/storage/v1/object/move', { preHandler: caller }, on(moveObject));
  scope.delete('/storage/v1/object/*', { preHandler: caller }, on(deleteObject));
}
