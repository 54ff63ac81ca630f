/** Image renditions (transform.ts): of an object the caller may read, of a public bucket's, and by a signed URL. */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { gatedCredential } from '../../core/credentials.ts';
import * as sdb from '../db.ts';
import { render } from '../download.ts';
import { parseObjectPath } from '../paths.ts';
import { parseTransform, TRANSFORM_ERRORS } from '../transform.ts';
import { RENDER_PREFIX, SERVICE, type Room } from './room.ts';

const AUTHENTICATED = `${RENDER_PREFIX}authenticated/`;
const PUBLIC = `${RENDER_PREFIX}public/`;
const SIGN = `${RENDER_PREFIX}sign/`;

async function renderAuthenticated(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const cred = gatedCredential(req);
  const { bucket, name } = parseObjectPath(req.url, AUTHENTICATED);
  const t = parseTransform(req.query as Record<string, unknown>);
  return render(room, req, reply, bucket, name, () => sdb.getObject(room.db, cred, bucket, name), t);
}

async function renderPublic(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const { bucket, name } = parseObjectPath(req.url, PUBLIC);
  const t = parseTransform(req.query as Record<string, unknown>);
  return render(room, req, reply, bucket, name, () => sdb.getPublicObject(room.db, bucket, name), t);
}

async function renderSigned(room: Room, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const { bucket, name } = parseObjectPath(req.url, SIGN);
  const q = req.query as Record<string, unknown>;
  const signed = await room.signer.verifyDownload(q.token, `${bucket}/${name}`);
  const t = parseTransform(signed ?? q);
  return render(room, req, reply, bucket, name, () => sdb.getObject(room.db, SERVICE, bucket, name), t);
}

export function registerRenderRoutes(app: FastifyInstance, room: Room): void {
  // Disabled (IMAGE_TRANSFORMATION=false): refused before anything else is looked at.
  const enabled = async () => {
    if (!room.deps.config.imageTransformation) throw TRANSFORM_ERRORS.disabled();
  };
  app.get(`${AUTHENTICATED}*`, { onRequest: enabled, preHandler: room.caller }, (req, reply) => renderAuthenticated(room, req, reply));
  app.get(`${PUBLIC}*`, { onRequest: enabled }, (req, reply) => renderPublic(room, req, reply));
  app.get(`${SIGN}*`, { onRequest: enabled }, (req, reply) => renderSigned(room, req, reply));
}
