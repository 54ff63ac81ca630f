/**
 * The storage routes, a file per resource: buckets (JSON), renders, and the objects and
 * uploads (raw bodies). The area (../index.ts) builds the back end and hands it here.
 *
 * The object routes live in their own fastify scope whose only body parser is a `*` one
 * that reads nothing: the handler gets the raw request stream, so neither MAX_BODY_BYTES
 * (the JSON shell's limit) nor buffering applies; the bucket's file_size_limit does.
 *
 * Credentials: a route any caller may use has the `caller` preHandler, one only the
 * service role may use the `serviceRole` onRequest hook (judged before the body is read);
 * handlers take the credential with `gatedCredential(req)`. Public and signed routes have
 * neither: the bucket or the token is the permission.
 */
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../../core/area.ts';
import type { Backend } from '../backends/backend.ts';
import type { ImageCache } from '../transform.ts';
import { registerBucketRoutes } from './buckets.ts';
import { registerObjectRoutes } from './objects.ts';
import { registerRenderRoutes } from './renders.ts';
import { makeRoom } from './room.ts';
import { registerUploadRoutes } from './uploads.ts';

export function registerStorageRoutes(app: FastifyInstance, deps: Deps, backend: Backend, images: ImageCache): void {
  const room = makeRoom(deps, backend, images);
  registerBucketRoutes(app, room);
  registerRenderRoutes(app, room);
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
    registerUploadRoutes(scope, room);
    registerObjectRoutes(scope, room);
  });
}
