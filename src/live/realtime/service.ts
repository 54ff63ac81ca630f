/**
 * Supabase Realtime's endpoints on plinth's live engine (docs/api/realtime.md):
 * `GET /realtime/v1/websocket?apikey=…&vsn=…` (Phoenix channels, connection.ts) and
 * `POST /realtime/v1/api/broadcast` (and realtime-js's `…/api/broadcast/{channel}/events/{event}`).
 *
 * This is a tap on the LiveService: the groups of table subscriptions are the engine's
 * groups (one RLS check per group of equal role and claims, in SQL), whose messages the
 * service hands here by route; broadcast and presence are plinth's channels, whose events
 * it hands here by name. Each change is matched here against each subscription's event and
 * filter and sent as Supabase's `postgres_changes` payload.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import type { Deps } from '../../core/area.ts';
import type { Credential } from '../../core/credentials.ts';
import { AppError } from '../../core/errors.ts';
import { clientIp } from '../../core/http.ts';
import * as q from '../db.ts';
import { pingRound } from '../hub.ts';
import type { LiveEngine, LiveTap } from '../tap.ts';
import { broadcastParts, keyOf, presenceDiff, type JoinedChannel, type TableSub } from './channel.ts';
import { Connection, type Host } from './connection.ts';
import { matches } from './filter.ts';
import { encodeChange, type Vsn } from './frames.ts';

/** A change as the group's message carries it (realtime.sql). */
interface Change {
  t: 'INSERT' | 'UPDATE' | 'DELETE';
  ts: string;
  new?: Record<string, unknown> | null;
  old?: Record<string, unknown> | null;
  too_large?: boolean;
}

const admitted = new WeakMap<FastifyRequest, { vsn: Vsn; cred: Credential }>();

/** The refusals, worded as /ws words them (docs/api/live.md). */
const ERR = {
  origin: () => new AppError(403, 'origin not allowed'),
  perIp: () => new AppError(429, 'too many connections from this address'),
  total: () => new AppError(503, 'connection limit reached'),
  metadata: (cause?: unknown) => new AppError(503, 'subscription metadata unavailable', { cause }),
  authenticationRequired: () => new AppError(401, 'authentication required'),
  audience: () => new AppError(403, 'audience not satisfied'),
  upgradeRequired: () => new AppError(426, 'upgrade required', { headers: { upgrade: 'websocket' } }),
} as const;

export class Realtime implements LiveTap, Host {
  readonly live: LiveEngine;
  readonly deps: Deps;
  readonly conns = new Set<Connection>();
  /** Table subscriptions by group route. */
  private readonly routes = new Map<string, Map<TableSub, Connection>>();
  readonly instanceTtl: number;
  private pinger: NodeJS.Timeout | null = null;

  constructor(live: LiveEngine, deps: Deps, instanceTtl: number) {
    this.live = live;
    this.deps = deps;
    this.instanceTtl = instanceTtl;
    live.taps.push(this);
  }

  get sql() {
    return this.deps.db.sql;
  }

  get instanceId(): string {
    return this.live.instanceId;
  }

  route(sub: TableSub, conn: Connection): void {
    let m = this.routes.get(sub.route);
    if (m === undefined) this.routes.set(sub.route, (m = new Map<TableSub, Connection>()));
    m.set(sub, conn);
  }

  unroute(sub: TableSub): void {
    const m = this.routes.get(sub.route);
    if (m === undefined) return;
    m.delete(sub);
    if (m.size === 0) this.routes.delete(sub.route);
  }

  groupIds(): Iterable<string> {
    return [...this.routes.keys()].map((r) => r.slice(1));
  }

  groupMessage(route: string, msg: object): boolean {
    const subs = this.routes.get(route);
    if (subs === undefined) return false;
    const m = msg as { type?: unknown; error?: unknown; changes?: unknown };
    if (m.type === 'error') {
      // The group went (its role may no longer read the table): its channels are closed.
      for (const [sub, conn] of [...subs]) conn.close(sub.channel, typeof m.error === 'string' ? m.error : 'subscription error');
      return true;
    }
    if (!Array.isArray(m.changes)) return true;
    for (const change of m.changes as Change[]) this.deliver(subs, change);
    return true;
  }

  /** One change to every subscription of its group whose event and filter it matches: one frame per channel. */
  private deliver(subs: Map<TableSub, Connection>, c: Change): void {
    const row = c.t === 'DELETE' ? c.old : c.new;
    const byChannel = new Map<JoinedChannel, { conn: Connection; ids: number[]; sub: TableSub }>();
    for (const [sub, conn] of subs) {
      if (sub.event !== '*' && sub.event !== c.t) continue;
      if (c.too_large === true ? sub.conditions.length > 0 : !matches(sub.conditions, row)) continue;
      const hit = byChannel.get(sub.channel);
      if (hit === undefined) byChannel.set(sub.channel, { conn, ids: [sub.id], sub });
      else hit.ids.push(sub.id);
    }
    // The subscriptions of one group share the table and its key: the data is serialised once.
    let dataJson: string | null = null;
    for (const [ch, { conn, ids, sub }] of byChannel) {
      dataJson ??= JSON.stringify({
        schema: 'public',
        table: sub.table,
        commit_timestamp: c.ts,
        type: c.t,
        columns: [],
        record: c.t === 'DELETE' || c.too_large === true ? {} : (c.new ?? {}),
        old_record: c.t === 'INSERT' ? {} : keyOf(c.old, sub.pk),
        errors: c.too_large === true ? ['Error 413: Payload Too Large'] : null,
      });
      conn.send(encodeChange(conn.vsn, ch.topic, ch.joinRef, ids, dataJson));
    }
  }

  event(channel: string, msg: unknown): void {
    if (this.conns.size === 0 || msg === null || typeof msg !== 'object') return;
    const m = msg as { type?: unknown; from?: unknown; payload?: unknown };
    let payloadJson: string | null = null;
    let event = '';
    let diff: object | null = null;
    if (m.type === 'broadcast') {
      const parts = broadcastParts(m.payload);
      event = parts.event;
      payloadJson = JSON.stringify(parts.payload ?? null);
    } else {
      diff = presenceDiff(m);
      if (diff === null) return;
    }
    for (const conn of this.conns) {
      for (const ch of conn.channels.values()) {
        if (ch.name !== channel) continue;
        if (payloadJson !== null) conn.deliverBroadcast(ch, m.from, event, payloadJson);
        else if (ch.presenceEnabled) conn.push(ch.topic, 'presence_diff', diff, ch.joinRef);
      }
    }
  }

  /** A broken table subscription: each channel with a subscription of it gets a `system` error and `phx_error` (realtime-js: CHANNEL_ERROR, then it rejoins). */
  broken(queryId: string): void {
    for (const subs of this.routes.values()) {
      for (const [sub, conn] of [...subs]) {
        if (sub.queryId === queryId) conn.fail(sub.channel, `table subscription broken: ${sub.table} was dropped or changed`);
      }
    }
  }

  reannounce(): void {
    for (const c of this.conns) c.reannounce();
  }

  async closeSockets(): Promise<void> {
    if (this.pinger !== null) clearInterval(this.pinger);
    this.pinger = null;
    await Promise.all(
      [...this.conns].map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.ws.readyState === c.ws.CLOSED) return resolve();
            c.ws.once('close', () => resolve());
            c.ws.close(1012, 'service restart');
            setTimeout(() => {
              c.ws.terminate();
              resolve();
            }, 1000).unref();
          }),
      ),
    );
  }

  /** The upgrade's checks, as for /ws (origin, caps, credential), and the protocol version. */
  async admit(req: FastifyRequest, upgrade: boolean): Promise<void> {
    const live = this.live;
    if (!live.originAllowed(req)) throw ERR.origin();
    const raw = (req.query as Record<string, unknown>).vsn;
    const vsn = raw === undefined || raw === '' ? '1.0.0' : raw;
    if (vsn !== '1.0.0' && vsn !== '2.0.0') throw new AppError(400, 'vsn must be 1.0.0 or 2.0.0');
    if (upgrade) {
      const ip = clientIp(req, this.deps.config.trustProxy);
      const full = live.hub.full(ip);
      if (full === 'total') throw ERR.total();
      if (full === 'ip') throw ERR.perIp();
      req.raw.socket.once('close', live.hub.reserve(ip));
    }
    const cred = await live.credential(req);
    admitted.set(req, { vsn, cred });
  }

  connect(ws: WebSocket, req: FastifyRequest): void {
    const a = admitted.get(req);
    if (a === undefined) return ws.close(1011, 'not admitted');
    this.conns.add(new Connection(this, ws, a.vsn, a.cred));
    if (this.pinger === null) {
      this.pinger = setInterval(() => this.ping(), this.deps.config.wsPingInterval * 1000);
      this.pinger.unref();
    }
  }

  private ping(): void {
    pingRound(this.conns);
  }

  /** `POST /realtime/v1/api/broadcast` and `…/{channel}/events/{event}`: broadcasts from HTTP, answered 202. */
  async httpBroadcast(req: FastifyRequest, messages: Array<{ topic: string; event: string; payload: unknown }>): Promise<void> {
    const cred = await this.deps.credentials.fromHeaders(req.headers);
    if (cred === null) throw new AppError(401, 'missing credentials');
    for (const m of messages) {
      const name = m.topic.startsWith('realtime:') ? m.topic.slice('realtime:'.length) : m.topic;
      let access: q.Access;
      try {
        access = await q.access(this.sql, name, cred.claims);
      } catch (err) {
        throw ERR.metadata(err);
      }
      if (access.bound && cred.role === 'anon') throw ERR.authenticationRequired();
      if (!access.allowed) throw ERR.audience();
    }
    for (const m of messages) {
      const name = m.topic.startsWith('realtime:') ? m.topic.slice('realtime:'.length) : m.topic;
      const text = JSON.stringify({ event: m.event, payload: m.payload ?? null });
      if (Buffer.byteLength(text) + Buffer.byteLength(name) > 7800) throw new AppError(413, 'broadcast payload too large');
      try {
        await q.broadcast(this.sql, this.live.bcChannel, name, 'http', text);
      } catch (err) {
        throw ERR.metadata(err);
      }
    }
  }
}

/** Registers the endpoints (inside the live area, after its WebSocket plugin). */
export function registerRealtime(app: FastifyInstance, live: LiveEngine, deps: Deps, instanceTtl: number): void {
  const rt = new Realtime(live, deps, instanceTtl);
  app.route({
    method: 'GET',
    url: '/realtime/v1/websocket',
    preValidation: async (req) => {
      await rt.admit(req, req.ws);
      if (!req.ws) throw ERR.upgradeRequired();
    },
    handler: async () => {
      throw ERR.upgradeRequired();
    },
    wsHandler: (socket, req) => rt.connect(socket, req),
  });
  app.post('/realtime/v1/api/broadcast', async (req, reply) => {
    const body = req.body as { messages?: unknown } | null;
    const list = body !== null && typeof body === 'object' && Array.isArray(body.messages) ? (body.messages as unknown[]) : null;
    if (list === null || list.length === 0 || list.length > 100) throw new AppError(400, 'messages must be an array of 1 to 100 messages');
    const messages = list.map((m) => {
      const o = (m ?? {}) as { topic?: unknown; event?: unknown; payload?: unknown };
      if (typeof o.topic !== 'string' || o.topic === '' || typeof o.event !== 'string' || o.event === '') {
        throw new AppError(400, 'each message needs a topic and an event');
      }
      return { topic: o.topic, event: o.event, payload: o.payload };
    });
    await rt.httpBroadcast(req, messages);
    return reply.code(202).send();
  });
  app.post<{ Params: { topic: string; event: string } }>('/realtime/v1/api/broadcast/:topic/events/:event', async (req, reply) => {
    await rt.httpBroadcast(req, [{ topic: req.params.topic, event: req.params.event, payload: req.body ?? null }]);
    return reply.code(202).send();
  });
}
