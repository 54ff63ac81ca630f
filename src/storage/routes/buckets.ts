/** Buckets (JSON bodies): create, list, read, update, empty and delete; all but reading are the service role's. */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { gatedCredential } from '../../core/credentials.ts';
import { ERRORS } from '../../core/errors.ts';
import { sendJsonText } from '../../core/http.ts';
import * as sdb from '../db.ts';
import { STORAGE_ERRORS } from '../errors.ts';
import { bucketIdOk, invalidBucketId, parseBucketId, rawPath } from '../paths.ts';
import { removeBytes } from '../upload.ts';
import { BUCKET_PREFIX, type Room } from './room.ts';

/** A bucket's file_size_limit as sent: a whole number of bytes, or null. */
function validLimit(v: unknown): boolean {
  return v === null || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);
}

/** A bucket's allowed_mime_types as sent: `type/subtype` strings, or null. */
function validTypes(v: unknown): boolean {
  return v === null || (Array.isArray(v) && v.every((t) => typeof t === 'string' && /^[^\s/]+\/[^\s/]+$/.test(t)));
}

function objectBody(req: FastifyRequest): Record<string, unknown> {
  const b = req.body as Record<string, unknown> | undefined;
  if (typeof b !== 'object' || b === null || Array.isArray(b)) throw ERRORS.invalidBody();
  return b;
}

async function createBucket(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const b = objectBody(req);
  const id = b.id ?? b.name;
  if (typeof id !== 'string') throw ERRORS.invalidBody();
  if (!bucketIdOk(id)) throw invalidBucketId();
  if (b.public !== undefined && b.public !== null && typeof b.public !== 'boolean') throw ERRORS.invalidBody();
  const limit = b.file_size_limit;
  if (limit !== undefined && !validLimit(limit)) throw ERRORS.invalidBody();
  const types = b.allowed_mime_types;
  if (types !== undefined && !validTypes(types)) throw ERRORS.invalidBody();
  const r = await sdb.createBucket(room.db, cred, {
    id,
    public: b.public === true,
    fileSizeLimit: typeof limit === 'number' ? limit : null,
    allowedMimeTypes: (types as string[] | null | undefined) ?? null,
  });
  if (r.status === 'exists') throw STORAGE_ERRORS.bucketExists();
  return sendJsonText(reply, 201, r.body);
}

async function listBuckets(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  return sendJsonText(reply, 200, await sdb.listBuckets(room.db, gatedCredential(req)));
}

async function deleteBucket(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const id = parseBucketId(req.url, BUCKET_PREFIX, invalidBucketId);
  const status = await sdb.deleteBucket(room.db, cred, id);
  switch (status) {
    case 'ok':
      return reply.code(200).send({ message: 'bucket deleted' });
    case 'not_found':
      throw STORAGE_ERRORS.bucketNotFound();
    case 'not_empty':
      throw STORAGE_ERRORS.bucketNotEmpty();
    default:
      return status satisfies never;
  }
}

async function getBucket(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const id = parseBucketId(req.url, BUCKET_PREFIX, invalidBucketId);
  const body = await sdb.getBucket(room.db, cred, id);
  if (body === null) throw STORAGE_ERRORS.bucketNotFound();
  return sendJsonText(reply, 200, body);
}

/** storage-js `updateBucket`: the fields sent are set, the others kept. */
async function updateBucket(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const id = parseBucketId(req.url, BUCKET_PREFIX, invalidBucketId);
  const b = objectBody(req);
  const patch: Record<string, unknown> = {};
  if (b.public !== undefined) {
    if (b.public !== null && typeof b.public !== 'boolean') throw ERRORS.invalidBody();
    patch.public = b.public;
  }
  if (b.file_size_limit !== undefined) {
    if (!validLimit(b.file_size_limit)) throw ERRORS.invalidBody();
    patch.file_size_limit = b.file_size_limit;
  }
  if (b.allowed_mime_types !== undefined) {
    if (!validTypes(b.allowed_mime_types)) throw ERRORS.invalidBody();
    patch.allowed_mime_types = b.allowed_mime_types;
  }
  if ((await sdb.updateBucket(room.db, cred, id, patch)) === 'not_found') throw STORAGE_ERRORS.bucketNotFound();
  return reply.code(200).send({ message: 'bucket updated' });
}

/** storage-js `emptyBucket`: POST /bucket/{id}/empty. */
async function emptyBucket(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const path = rawPath(req.url);
  if (!path.endsWith('/empty')) throw ERRORS.notFound();
  const id = parseBucketId(path.slice(0, -'/empty'.length), BUCKET_PREFIX, invalidBucketId);
  const r = await sdb.emptyBucket(room.db, cred, id);
  if (r.status === 'not_found') throw STORAGE_ERRORS.bucketNotFound();
  for (const o of r.removed ?? []) await removeBytes(room, { bucket: id, name: o.name, id: o.id }, 'deleted');
  return reply.code(200).send({ message: 'bucket emptied' });
}

export function registerBucketRoutes(app: FastifyInstance, room: Room): void {
  const { caller, serviceRole } = room;
  app.post('/storage/v1/bucket', { onRequest: serviceRole }, (req, reply) => createBucket(room, req, reply));
  app.get('/storage/v1/bucket', { preHandler: caller }, (req, reply) => listBuckets(room, req, reply));
  app.delete('/storage/v1/bucket/*', { onRequest: serviceRole }, (req, reply) => deleteBucket(room, req, reply));
  app.get('/storage/v1/bucket/*', { preHandler: caller }, (req, reply) => getBucket(room, req, reply));
  app.put('/storage/v1/bucket/*', { onRequest: serviceRole }, (req, reply) => updateBucket(room, req, reply));
  app.post('/storage/v1/bucket/*', { onRequest: serviceRole }, (req, reply) => emptyBucket(room, req, reply));
}
