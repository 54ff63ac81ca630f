/**
 * The live routes (docs/api/live.md):
 *
 * - `GET /ws/{query_id}` (upgrade): every refusal is an HTTP response before the upgrade
 *   with an `{error}` body. Then `{type: subscribed, query_id, client_id, snapshot: true}`
 *   and what PostgreSQL sends for the subscription (delta, invalidated, overflow) on
 *   LIVE_CHANNEL, plus broadcast and presence of the channel `query_id`. A client's
 *   `{type: snapshot}` is answered with the stored result and the seq it is at, which a
 *   resume starts from (decision 0300).
 * - `GET /ws/_presence/{channel}`: client_id → last state, over every instance.
 * - Credentials of the upgrade: credential.ts (the client offers `plinth` too and only
 *   `plinth` is echoed back, never the entry that carries the token).
 * - A socket is closed with 4001 when its token's `exp` passes. A client may send
 *   `{type: auth, token}` with a fresher token of the same identity to move that deadline;
 *   a token that does not verify, names another identity or fails the channel's audience
 *   closes the socket with 4001 at once (socket.ts).
 *
 * Broadcast and presence go through PostgreSQL too (NOTIFY, a presence table with instance
 * heartbeats), so every instance on the same database sees them. Supabase Realtime's
 * protocol (realtime/) is registered here, on the same engine.
 */
import websocket from '@fastify/websocket';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import type { Deps } from '../core/area.ts';
import { sendJsonText } from '../core/http.ts';
import * as q from './db.ts';
import { INSTANCE_TTL, LIVE_ERRORS, MAX_FRAME_BYTES, SUBPROTOCOL, type Admission } from './protocol.ts';
import { registerRealtime } from './realtime/service.ts';
import type { LiveService } from './service.ts';

type QueryRequest = FastifyRequest<{ Params: { query_id: string } }>;

const admitted = new WeakMap<FastifyRequest, Admission>();

/** The upgrade's checks, before it happens: a refusal is an HTTP answer. */
async function admitUpgrade(svc: LiveService, req: QueryRequest): Promise<void> {
  const admission = await svc.admit(req, req.params.query_id, req.ws);
  if (!req.ws) throw LIVE_ERRORS.upgradeRequired();
  admitted.set(req, admission);
}

function connectSocket(svc: LiveService, socket: WebSocket, req: QueryRequest): void {
  const admission = admitted.get(req);
  if (admission === undefined) return socket.close(1011, 'not admitted'); // every upgrade passes preValidation first
  svc.connect(socket, req.params.query_id, admission);
}

async function presenceOf(svc: LiveService, req: FastifyRequest<{ Params: { channel: string } }>, reply: FastifyReply): Promise<unknown> {
  await svc.admit(req, req.params.channel, false);
  let body: string;
  try {
    body = await q.presenceList(svc.sql, req.params.channel, INSTANCE_TTL);
  } catch (err) {
    throw LIVE_ERRORS.metadata(err);
  }
  reply.header('cache-control', 'no-store');
  return sendJsonText(reply, 200, body);
}

export async function registerLiveRoutes(app: FastifyInstance, svc: LiveService, deps: Deps): Promise<void> {
  await app.register(websocket, {
    options: {
      maxPayload: MAX_FRAME_BYTES,
      perMessageDeflate: false,
      // Only `plinth` is ever echoed: never the entry that carries the token.
      handleProtocols: (protocols: Set<string>) => (protocols.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
    },
    preClose(done) {
      svc.closeSockets().then(() => {
        this.websocketServer.close();
        done();
      }, done);
    },
  });

  app.route<{ Params: { query_id: string } }>({
    method: 'GET',
    url: '/ws/:query_id',
    preValidation: (req) => admitUpgrade(svc, req),
    handler: async () => {
      throw LIVE_ERRORS.upgradeRequired();
    },
    wsHandler: (socket, req) => connectSocket(svc, socket, req),
  });

  registerRealtime(app, svc, deps, INSTANCE_TTL);

  app.get<{ Params: { channel: string } }>('/ws/_presence/:channel', (req, reply) => presenceOf(svc, req, reply));
}
