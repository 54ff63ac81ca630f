/**
 * Uploads (raw bodies, in the objects' scope): POST creates, PUT replaces (storage-js
 * `update`), and signed upload URLs: POST signs one, PUT spends it (upload.ts does the work).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { gatedCredential } from '../../core/credentials.ts';
import { toAppError } from '../../core/http.ts';
import * as sdb from '../db.ts';
import { drain } from '../body.ts';
import { throwUnlessOk } from '../errors.ts';
import { pickMimeType } from '../mime.ts';
import { parseObjectPath } from '../paths.ts';
import { store } from '../upload.ts';
import { OBJECT_PREFIX, UPLOAD_SIGN_PREFIX, unlessBucket, upsertAsked, type Room } from './room.ts';

export async function uploadObject(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const { bucket, name } = parseObjectPath(req.url, OBJECT_PREFIX);
  return reply.code(200).send(await store(room, req, reply, { ctx: cred, bucket, name, upsert: upsertAsked(req) }));
}

/** storage-js `update`: the same upload, replacing what is there. */
export async function updateObject(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const { bucket, name } = parseObjectPath(req.url, OBJECT_PREFIX);
  return reply.code(200).send(await store(room, req, reply, { ctx: cred, bucket, name, upsert: true }));
}

/** A signed upload URL, if the caller may create the object now (begin_upload, rolled back). */
async function signUpload(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const { bucket, name } = parseObjectPath(req.url, UPLOAD_SIGN_PREFIX);
  const upsert = upsertAsked(req);
  await drain(req);
  const probe = new Error('probe');
  try {
    await room.db.transactionWithContext(cred, async (tx) => {
      const r = await sdb.beginUpload(tx, { bucket, name, mimeType: pickMimeType(null, name), declaredSize: null, upsert });
      if (r.status !== 'mime_not_allowed') throwUnlessOk(r.status);
      throw probe;
    });
  } catch (err) {
    if (err !== probe) throw toAppError(err);
  }
  const token = await room.signer.upload(`${bucket}/${name}`, cred, upsert);
  return reply.code(200).send({ url: `/object/upload/sign/${bucket}/${name}?token=${token}`, token });
}

/** An upload by a signed URL: as its signer, once. */
async function uploadSigned(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const { bucket, name } = parseObjectPath(req.url, UPLOAD_SIGN_PREFIX);
  const grant = await room.signer.verifyUpload((req.query as Record<string, unknown>).token, `${bucket}/${name}`);
  const r = await store(room, req, reply, { ctx: grant.ctx, bucket, name, upsert: grant.upsert, claim: grant });
  return reply.code(200).send({ Id: r.id, Key: r.key });
}

/** In the raw scope (no body parser). */
export function registerUploadRoutes(scope: FastifyInstance, room: Room): void {
  const { caller } = room;
  const upload = (req: FastifyRequest, reply: FastifyReply) => uploadObject(room, req, reply);
  const update = (req: FastifyRequest, reply: FastifyReply) => updateObject(room, req, reply);
  scope.post('/storage/v1/object/*', { preHandler: caller }, upload);
  scope.put('/storage/v1/object/*', { preHandler: caller }, update);
  scope.post('/storage/v1/object/upload/sign/*', { preHandler: caller }, unlessBucket(room, 'upload', upload, (req, reply) => signUpload(room, req, reply)));
  scope.put('/storage/v1/object/upload/sign/*', unlessBucket(room, 'upload', update, (req, reply) => uploadSigned(room, req, reply)));
}
