/**
 * Live queries, broadcast and presence over WebSocket (docs/api/live.md).
 *
 * - `GET /ws/{query_id}` (upgrade): every refusal is an HTTP response before the upgrade
 *   with an `{error}` body. Then `{type: subscribed, query_id, client_id, snapshot: true}`
 *   and what PostgreSQL sends for the subscription (delta, invalidated, overflow) on
 *   LIVE_CHANNEL, plus broadcast and presence of the channel `query_id`. A client's
 *   `{type: snapshot}` is answered with the stored result and the seq it is at, which a
 *   resume starts from (decision 0300).
 * - `GET /ws/_presence/{channel}`: client_id → last state, over every instance.
 * - Credentials of the upgrade: `Authorization: Bearer`, then the `Sec-WebSocket-Protocol`
 *   entry `base64url.bearer.<token, base64url>` (the way a browser can send a token without
 *   putting it in the URL, as Kubernetes does; the client offers `plinth` too and only
 *   `plinth` is echoed back), then `?token=`, the `token` cookie, `apikey`, `?apikey=`.
 * - A socket is closed with 4001 when its token's `exp` passes. A client may send
 *   `{type: auth, token}` with a fresher token of the same identity to move that deadline;
 *   a token that does not verify, names another identity or fails the channel's audience
 *   closes the socket with 4001 at once.
 *
 * The registry, snapshots, groups and diffs live in SQL (sql/fixtures/live); the poller
 * (poller.ts) re-runs what writers marked, off their path. This instance holds the
 * sockets, routed by subscription or, for `as: subscriber`, by group: one LISTEN (on the
 * instance's listener connection) for LIVE_CHANNEL and `<LIVE_CHANNEL>_bc`; when it
 * comes back after a gap, every route whose seq moved on is sent one `overflow`, so no
 * client misses a change silently. A broken subscription's sockets get an `error` message
 * and close 4002. Broadcast and presence go through
 * PostgreSQL too (NOTIFY, a presence table with instance heartbeats), so every instance
 * on the same database sees them.
 */
import { originsFor } from '../core/origins.ts';
import websocket from '@fastify/websocket';
import type { FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import type { Area, Deps } from '../core/area.ts';
import type { Credential } from '../core/credentials.ts';
import { AppError, ERRORS } from '../core/errors.ts';
import { clientIp, sendJsonText } from '../core/http.ts';
import { Hub, routeOfGroup, type Client } from './hub.ts';
import * as q from './db.ts';
import { Poller, runAs } from './poller.ts';
import type { LiveTap } from './tap.ts';
import { registerRealtime } from './realtime/service.ts';

/** Seconds without a heartbeat after which an instance and its clients' presence expire. */
export const INSTANCE_TTL = 5;
const HEARTBEAT_MS = 1000;
/** Largest client frame accepted (a broadcast must also fit a NOTIFY payload). */
const MAX_FRAME_BYTES = 64 * 1024;
/** Payload + channel bytes a broadcast may have: the NOTIFY envelope adds about 150. */
const MAX_BROADCAST_BYTES = 7800;
/** The subprotocol a client offers and plinth echoes back. */
export const SUBPROTOCOL = 'plinth';
/** The prefix of the subprotocol entry that carries the token, base64url-encoded. */
export const BEARER_PROTOCOL_PREFIX = 'base64url.bearer.';
/** Close code of a socket whose credential expired or was replaced by one not valid for it. */
export const CLOSE_TOKEN_EXPIRED = 4001;
/** Close code of a socket whose subscription's query stopped working (after an `error` message). */
export const CLOSE_BROKEN = 4002;
/** setTimeout's longest delay; a later deadline (the anon key lives ten years) is re-armed. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export const LIVE_ERRORS = {
  subscriptionNotFound: () => new AppError(404, 'subscription not found'),
  authenticationRequired: () => new AppError(401, 'authentication required'),
  audience: () => new AppError(403, 'audience not satisfied'),
  origin: () => new AppError(403, 'origin not allowed'),
  perIp: () => new AppError(429, 'too many connections from this address'),
  total: () => new AppError(503, 'connection limit reached'),
  metadata: (cause?: unknown) => new AppError(503, 'subscription metadata unavailable', { cause }),
  broken: () => new AppError(410, 'subscription is broken'),
  tooManyGroups: () => new AppError(503, 'live query group limit reached'),
  tooLarge: () => new AppError(413, 'live query result too large'),
  notReadable: () => new AppError(403, 'permission denied for this live query'),
  upgradeRequired: () => new AppError(426, 'upgrade required', { headers: { upgrade: 'websocket' } }),
} as const;

function queryParam(req: FastifyRequest, name: string): string | undefined {
  const v = (req.query as Record<string, unknown> | undefined)?.[name];
  if (Array.isArray(v)) return typeof v[0] === 'string' ? v[0] : undefined;
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/**
 * The token of a `base64url.bearer.<token>` entry of Sec-WebSocket-Protocol; undefined
 * when there is none. An entry that is not base64url is an invalid token.
 */
function protocolToken(req: FastifyRequest): string | undefined {
  const header = req.headers['sec-websocket-protocol'];
  if (typeof header !== 'string') return undefined;
  for (const entry of header.split(',')) {
    const p = entry.trim();
    if (!p.startsWith(BEARER_PROTOCOL_PREFIX)) continue;
    const encoded = p.slice(BEARER_PROTOCOL_PREFIX.length);
    if (!/^[A-Za-z0-9_-]+$/.test(encoded)) throw ERRORS.invalidToken();
    return Buffer.from(encoded, 'base64url').toString('utf8');
  }
  return undefined;
}

/** What an admitted upgrade was let in with, for its socket. */
export interface Admission {
  cred: Credential;
  /** Where its messages come from (Hub routes). */
  route: string;
  /** The subscription's (or its group's) seq when it was let in. */
  seq: number;
  /** The group of an `as: subscriber` subscription. */
  groupId: string | null;
}
const admitted = new WeakMap<FastifyRequest, Admission>();

function cookie(req: FastifyRequest, name: string): string | undefined {
  const raw = req.headers.cookie;
  if (typeof raw !== 'string') return undefined;
  for (const part of raw.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) {
      const v = part.slice(i + 1).trim();
      try {
        return v === '' ? undefined : decodeURIComponent(v);
      } catch {
        return v;
      }
    }
  }
  return undefined;
}

export class LiveService {
  readonly hub: Hub;
  readonly taps: LiveTap[] = [];
  readonly instanceId: string;
  readonly bcChannel: string;
  private readonly deps: Deps;
  private timers: NodeJS.Timeout[] = [];
  private listens = 0;
  private configured = false;
  private closed = false;
  private beating = false;
  private unlisten: Array<() => Promise<void>> = [];
  private gapRunning = false;
  private gapAgain = false;
  readonly poller: Poller;
  /** Groups admitted into and not yet connected (id → when), kept in the membership meanwhile. */
  private readonly pendingGroups = new Map<string, number>();
  private pendingLeaves: Array<() => Promise<void>> = [];
  /**
   * Test hook: while not null, subscription messages from PostgreSQL wait here instead of
   * reaching the sockets (a delta held back past a client's resume); `releaseDeltas()`
   * delivers them in the order they came.
   */
  heldDeltas: Array<[payload: string, arrivedAt: number]> | null = null;

  constructor(deps: Deps) {
    this.deps = deps;
    this.instanceId = deps.db.instanceId;
    this.hub = new Hub(deps.config.wsMaxConnections, deps.config.wsMaxConnectionsPerIp);
    this.hub.onDelivered = (seconds) => deps.metrics.liveDelivery.observe(seconds);
    this.bcChannel = `${deps.config.liveChannel.slice(0, 60)}_bc`;
    deps.metrics.onCollect(() => {
      deps.metrics.liveSockets.set(this.hub.all().length);
      deps.metrics.liveSubscriptions.set(this.hub.channels.size);
    });
    this.poller = new Poller(deps, this.instanceId);
  }

  get sql() {
    return this.deps.db.sql;
  }

  async start(): Promise<void> {
    await this.ensureConfigured();
    const { listener } = this.deps.db;
    const onlisten = () => this.onListen();
    // The listener listens again by itself after its connection comes back; onlisten fires
    // again then, which is how a gap is detected.
    void Promise.all([
      listener.listen(this.deps.config.liveChannel, (p) => this.onDelta(p), onlisten),
      listener.listen(this.bcChannel, (p) => this.onEvent(p)),
      // A writer's wake-up for the poller (live_private.wake): `<LIVE_CHANNEL>_wake`.
      listener.listen(`${this.deps.config.liveChannel.slice(0, 58)}_wake`, () => this.poller.wake()),
    ]).then(
      (hs) => {
        this.unlisten = hs.map((h) => () => h.unlisten());
        if (this.closed) for (const u of this.unlisten) void u();
      },
      (err: unknown) => this.deps.log.warn({ err }, 'live listener stopped'),
    );
    await this.beat();
    this.poller.start();
    const hb = setInterval(() => void this.beat(), HEARTBEAT_MS);
    hb.unref();
    const ping = setInterval(() => this.hub.ping(), this.deps.config.wsPingInterval * 1000);
    ping.unref();
    this.timers.push(hb, ping);
  }

  private async ensureConfigured(): Promise<void> {
    if (this.configured) return;
    try {
      const { liveChannel, liveMaxRows, liveMaxGroups } = this.deps.config;
      await q.configure(this.sql, liveChannel, liveMaxRows, liveMaxGroups);
      this.configured = true;
    } catch (err) {
      this.deps.log.warn({ err }, 'live: LIVE_CHANNEL not recorded yet (database unavailable); retrying');
    }
  }

  private onListen(): void {
    this.listens++;
    if (this.listens > 1) void this.gap();
  }

  /**
   * The LISTEN connection was lost and is back: notifications may be missing. A route whose
   * seq moved past the last one its clients were sent gets one overflow; one that did not
   * gets nothing. The driver may report several reconnects for one outage (a database
   * restart): they are coalesced, and a route is never sent the same overflow twice.
   */
  private async gap(): Promise<void> {
    if (this.gapRunning) {
      this.gapAgain = true;
      return;
    }
    this.gapRunning = true;
    try {
      do {
        this.gapAgain = false;
        await this.overflowMissed();
      } while (this.gapAgain && !this.closed);
    } finally {
      this.gapRunning = false;
    }
  }

  private async overflowMissed(): Promise<void> {
    for (let attempt = 0; attempt < 20 && !this.closed; attempt++) {
      try {
        // A restart loses the writers' unlogged marks: everything re-run is re-run once.
        await q.markAllDirty(this.sql);
        this.poller.wake();
        if (this.hub.routes.size === 0) return;
        const current = await q.routeSeqs(this.sql, [...this.hub.routes.keys()]);
        for (const [route, seq] of current) {
          const first = this.hub.routes.get(route)?.values().next().value;
          if (first === undefined || seq === this.hub.seqs.get(route)) continue;
          this.deps.log.warn({ query_id: first.channel, seq }, 'live: notifications missed while the listener was away; sending overflow');
          this.hub.deliver(route, JSON.stringify({ type: 'overflow', query_id: first.channel, seq, fetch: true }), seq);
        }
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  }

  /** Test hook: deliver the messages held by `heldDeltas` and hold no more. */
  releaseDeltas(): void {
    const held = this.heldDeltas ?? [];
    this.heldDeltas = null;
    for (const [payload, arrivedAt] of held) this.onDelta(payload, arrivedAt, false);
  }

  private onDelta(payload: string, arrivedAt = performance.now(), count = true): void {
    if (this.heldDeltas !== null) {
      this.heldDeltas.push([payload, arrivedAt]);
      return;
    }
    if (count) this.deps.metrics.liveNotifies.inc();
    // `<gid>|<message>`: a message of one group of an `as: subscriber` subscription.
    let route: string | null = null;
    const bar = payload.charCodeAt(0) === 123 /* { */ ? -1 : payload.indexOf('|');
    if (bar > 0) {
      route = routeOfGroup(payload.slice(0, bar));
      payload = payload.slice(bar + 1);
    }
    let msg: { type?: unknown; query_id?: unknown; seq?: unknown };
    try {
      msg = JSON.parse(payload) as typeof msg;
    } catch {
      return;
    }
    if (typeof msg.query_id !== 'string') return;
    if (msg.type === 'unsubscribed') {
      for (const c of this.hub.channels.get(msg.query_id) ?? []) c.ws.close(1000, 'subscription removed');
      return;
    }
    if (route !== null && this.taps.some((tap) => tap.groupMessage(route, msg))) return;
    if (msg.type === 'error' && route !== null) {
      // The group went (its role may no longer read the query, or its result is too large).
      for (const c of this.hub.routes.get(route) ?? []) {
        this.hub.send(c, payload);
        c.ws.close(CLOSE_BROKEN, 'live query error');
      }
      return;
    }
    if (msg.type === 'broken') {
      const clients = this.hub.channels.get(msg.query_id);
      if (clients === undefined) return;
      this.deps.log.warn({ query_id: msg.query_id, clients: clients.size }, 'live: subscription broken; closing its sockets');
      const text = JSON.stringify({ type: 'error', query_id: msg.query_id, error: LIVE_ERRORS.broken().message });
      for (const c of clients) {
        this.hub.send(c, text);
        c.ws.close(CLOSE_BROKEN, 'subscription broken');
      }
      return;
    }
    this.hub.deliver(route ?? msg.query_id, payload, typeof msg.seq === 'number' ? msg.seq : NaN, arrivedAt);
  }

  private onEvent(payload: string): void {
    this.deps.metrics.liveNotifies.inc();
    let ev: { channel?: unknown; msg?: unknown };
    try {
      ev = JSON.parse(payload) as typeof ev;
    } catch {
      return;
    }
    if (typeof ev.channel !== 'string') return;
    for (const tap of this.taps) tap.event(ev.channel, ev.msg);
    if (!this.hub.channels.has(ev.channel)) return;
    this.deps.metrics.liveBroadcasts.inc(this.hub.channels.get(ev.channel)!.size);
    this.hub.fanout(ev.channel, JSON.stringify(ev.msg));
  }

  private async beat(): Promise<void> {
    if (this.closed || this.beating) return;
    this.beating = true;
    await this.ensureConfigured();
    try {
      while (this.pendingLeaves.length > 0) {
        await this.pendingLeaves[0]();
        this.pendingLeaves.shift();
      }
      // On the listener's connection: a periodic statement keeps no request connection from idling out.
      const fresh = await q.heartbeat(this.deps.db.listener, this.instanceId, this.bcChannel, INSTANCE_TTL);
      await q.syncMembers(this.deps.db.listener, this.instanceId, this.groupIds());
      if (fresh) {
        // First beat, or this instance had been declared dead: announce its clients again.
        for (const c of this.hub.all()) if (c.state !== null) this.presence(c, c.state);
      }
    } catch (err) {
      this.deps.log.debug({ err }, 'live: heartbeat failed');
    } finally {
      this.beating = false;
    }
  }

  /** The caller's credential for /ws (an admin's token below aal2 checked as on REST: core/credentials.ts). */
  async credential(req: FastifyRequest): Promise<Credential> {
    return this.deps.credentials.aalChecked(await this.presented(req));
  }

  /** The credential presented: Bearer, the bearer subprotocol, ?token=, the token cookie, apikey, ?apikey=. */
  private async presented(req: FastifyRequest): Promise<Credential> {
    const { credentials, config } = this.deps;
    const auth = req.headers.authorization;
    if (auth !== undefined && auth !== '') return (await credentials.fromHeaders(req.headers))!;
    const token = protocolToken(req) ?? queryParam(req, 'token') ?? cookie(req, 'token');
    if (token !== undefined) return credentials.verify(token);
    const headerKey = req.headers.apikey;
    const apikey = typeof headerKey === 'string' && headerKey !== '' ? headerKey : queryParam(req, 'apikey');
    if (apikey !== undefined) {
      const cred = await credentials.verify(apikey);
      if (cred.role === 'anon' || cred.role === 'service_role') return cred;
      throw ERRORS.invalidToken();
    }
    if (config.devMode) return credentials.anonymous;
    throw ERRORS.missingCredentials();
  }

  originAllowed(req: FastifyRequest): boolean {
    const origin = req.headers.origin;
    if (origin === undefined) return true; // not a browser
    const { config } = this.deps;
    const origins = originsFor(config);
    if (origins.allows(origin)) return true;
    if (origin === new URL(config.apiExternalUrl).origin) return true;
    const host = req.headers.host;
    if (host !== undefined && (origin === `http://${host}` || origin === `https://${host}`)) return true;
    origins.refused(origin, req.log, 'a WebSocket');
    return false;
  }

  /** The checks shared by the upgrade and the presence endpoint (docs/api/live.md). */
  async admit(req: FastifyRequest, channel: string, upgrade: boolean): Promise<Admission> {
    if (!this.originAllowed(req)) throw LIVE_ERRORS.origin();
    if (upgrade) {
      const ip = clientIp(req, this.deps.config.trustProxy);
      const full = this.hub.full(ip);
      if (full === 'total') throw LIVE_ERRORS.total();
      if (full === 'ip') throw LIVE_ERRORS.perIp();
      // Counted from here (so concurrent upgrades cannot pass the caps while this one is
      // checked) until the underlying socket closes: after a refusal that is at once.
      req.raw.socket.once('close', this.hub.reserve(ip));
    }
    const cred = await this.credential(req);
    const real = cred.role === 'authenticated' || cred.role === 'service_role';
    if (this.deps.config.requireAuthenticatedWs && !real) throw LIVE_ERRORS.authenticationRequired();
    let access: q.Access;
    try {
      access = await q.access(this.sql, channel, cred.claims);
    } catch (err) {
      throw LIVE_ERRORS.metadata(err);
    }
    if (upgrade && !access.registered) throw LIVE_ERRORS.subscriptionNotFound();
    if (access.bound && cred.role === 'anon') throw LIVE_ERRORS.authenticationRequired();
    if (!access.allowed) throw LIVE_ERRORS.audience();
    if (upgrade && access.broken) throw LIVE_ERRORS.broken();
    if (upgrade && access.as_subscriber) return await this.joinGroup(channel, cred);
    return { cred, route: channel, seq: access.seq, groupId: null };
  }

  /** The groups this instance has sockets in, or has admitted one into. */
  private groupIds(): string[] {
    const ids = new Set<string>();
    for (const [route, clients] of this.hub.routes) {
      if (route.charCodeAt(0) === 1 && clients.size > 0) ids.add(route.slice(1));
    }
    for (const tap of this.taps) for (const id of tap.groupIds()) ids.add(id);
    const stale = Date.now() - 10_000;
    for (const [id, at] of this.pendingGroups) {
      if (at < stale) this.pendingGroups.delete(id);
      else ids.add(id);
    }
    return [...ids];
  }

  /**
   * An `as: subscriber` socket joins the group of its role and observed claims; a new
   * group's first result is read on its lane before the socket is confirmed, so every
   * change after that reaches it as a delta.
   */
  private async joinGroup(channel: string, cred: Credential): Promise<Admission> {
    let joined: q.Joined | null;
    for (let attempt = 1; ; attempt++) {
      try {
        joined = await q.joinGroup(this.sql, this.instanceId, channel, cred.role, cred.claims);
        break;
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (code === '54000') throw LIVE_ERRORS.tooManyGroups();
        // A deadlock or serialization failure against the poller or a heartbeat: again.
        if ((code === '40P01' || code === '40001') && attempt < 3) continue;
        throw LIVE_ERRORS.metadata(err);
      }
    }
    if (joined === null) throw LIVE_ERRORS.broken(); // broken or replaced since the access check
    this.pendingGroups.set(joined.group_id, Date.now());
    let seq = joined.seq;
    if (joined.needs_init) {
      let result: { rows: string; n: number; snap: string };
      try {
        result = await runAs(this.deps, cred.role, joined.group_claims, joined.query);
      } catch (err) {
        if ((err as { code?: unknown }).code === '42501') throw LIVE_ERRORS.notReadable();
        throw LIVE_ERRORS.metadata(err);
      }
      if (result.n > this.deps.config.liveMaxRows) throw LIVE_ERRORS.tooLarge();
      try {
        seq = await q.initGroup(this.sql, joined.group_id, result.rows, result.snap);
      } catch (err) {
        throw LIVE_ERRORS.metadata(err);
      }
      this.poller.wake(); // a group that re-runs catches up on what committed since its first run
    }
    return { cred, route: routeOfGroup(joined.group_id), seq, groupId: joined.group_id };
  }

  /** A new socket on `channel`, let in as `admission` says. */
  connect(ws: WebSocket, channel: string, admission: Admission): void {
    const cred = admission.cred;
    const client = this.hub.add(channel, ws, admission.route, admission.seq);
    if (admission.groupId !== null) this.pendingGroups.delete(admission.groupId);
    // The socket lives as long as its credential: closed with 4001 at `exp`.
    let current = cred;
    let expiry: NodeJS.Timeout | null = null;
    let authRunning = false;
    let authPending: string | null = null;
    const arm = () => {
      if (expiry !== null) clearTimeout(expiry);
      expiry = null;
      if (!Number.isFinite(current.exp)) return;
      const ms = current.exp * 1000 - Date.now();
      if (ms <= 0) {
        ws.close(CLOSE_TOKEN_EXPIRED, 'token expired');
        return;
      }
      expiry = setTimeout(() => (ms > MAX_TIMER_MS ? arm() : ws.close(CLOSE_TOKEN_EXPIRED, 'token expired')), Math.min(ms, MAX_TIMER_MS));
      expiry.unref();
    };
    arm();
    // One auth message is checked at a time (each costs a database round trip); of those
    // that arrive meanwhile only the latest is checked next, and a verdict is dropped when
    // a later message arrived while it was reached.
    const reauthenticate = async (token: string) => {
      if (authRunning) {
        authPending = token;
        return;
      }
      authRunning = true;
      try {
        for (let next: string | null = token; next !== null; next = authPending) {
          authPending = null;
          const verdict = await this.reauthenticate(channel, current, next, admission.groupId);
          if (ws.readyState !== ws.OPEN) return;
          if (authPending !== null) continue; // a later message decides
          if (verdict === null) {
            ws.close(CLOSE_TOKEN_EXPIRED, 'invalid token');
            return;
          }
          // 'unavailable' (the database is away): the current deadline stands.
          if (verdict !== 'unavailable') {
            current = verdict;
            arm();
          }
        }
      } finally {
        authRunning = false;
      }
    };
    ws.on('pong', () => {
      client.alive = true;
    });
    // One snapshot read in flight per socket; requests meanwhile are answered by one more.
    let snapshotRunning = false;
    let snapshotAgain = false;
    const snapshot = async () => {
      if (snapshotRunning) {
        snapshotAgain = true;
        return;
      }
      snapshotRunning = true;
      try {
        do {
          snapshotAgain = false;
          await this.sendSnapshot(client, admission.groupId);
        } while (snapshotAgain && ws.readyState === ws.OPEN);
      } finally {
        snapshotRunning = false;
      }
    };
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      let msg: { type?: unknown; payload?: unknown; state?: unknown };
      try {
        msg = JSON.parse(Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]).toString('utf8')) as typeof msg;
      } catch {
        return;
      }
      if (msg === null || typeof msg !== 'object') return;
      if (msg.type === 'snapshot') {
        void snapshot();
        return;
      }
      if (msg.type === 'auth') {
        const token = (msg as { token?: unknown }).token;
        void reauthenticate(typeof token === 'string' ? token : '');
        return;
      }
      if (msg.type === 'broadcast' && 'payload' in msg) {
        const payload = JSON.stringify(msg.payload ?? null);
        // What cannot fit a NOTIFY payload (8000 bytes with the envelope) is dropped here.
        if (Buffer.byteLength(payload) + Buffer.byteLength(channel) > MAX_BROADCAST_BYTES) return;
        if (client.batch !== null) {
          client.batch.push(payload); // joins the broadcasts still waiting at the tail
        } else {
          const batch = (client.batch = [payload]);
          this.enqueue(client, () => {
            if (client.batch === batch) client.batch = null;
            return batch.length === 1
              ? q.broadcast(this.sql, this.bcChannel, channel, client.id, batch[0])
              : q.broadcastMany(this.sql, this.bcChannel, channel, client.id, batch);
          });
        }
      } else if (msg.type === 'presence' && msg.state !== null && typeof msg.state === 'object' && !Array.isArray(msg.state)) {
        this.presence(client, JSON.stringify(msg.state));
      }
    });
    ws.on('close', () => {
      if (expiry !== null) clearTimeout(expiry);
      expiry = null;
      this.hub.remove(client);
      if (client.state !== null) {
        client.state = null;
        // A leave that cannot reach the database (it is away) is retried by the heartbeat,
        // so no client stays listed after it left.
        const leave = () => q.presenceLeave(this.sql, this.bcChannel, channel, client.id);
        client.queue = client.queue.then(leave).catch(() => {
          this.pendingLeaves.push(leave);
        });
      }
    });
    // `snapshot: true`: this service answers `{type: snapshot}` with the stored result (decision 0300).
    this.hub.send(client, JSON.stringify({ type: 'subscribed', query_id: channel, client_id: client.id, snapshot: true }));
  }

  /**
   * The answer to a client's `{type: snapshot}`: the subscription's (or its group's) stored
   * result and the seq it is at, read in one statement after the request arrived. The socket
   * was in the hub before, so every change the result does not hold reaches it as a message
   * with a higher seq, and those it holds come with a seq at most this one (the client drops
   * them). `rows: null` when there is nothing to send (notify mode, the database away): the
   * client loads the result itself then.
   */
  private async sendSnapshot(client: Client, groupId: string | null): Promise<void> {
    const queryId = JSON.stringify(client.channel);
    let text = `{"type":"snapshot","query_id":${queryId},"seq":null,"rows":null}`;
    try {
      const stored = await q.storedResult(this.sql, client.channel, groupId);
      if (stored !== null) text = `{"type":"snapshot","query_id":${queryId},"seq":${stored.seq},"rows":${stored.rows}}`;
    } catch (err) {
      this.deps.log.debug({ err, client: client.id }, 'live: stored result unavailable for a snapshot');
    }
    this.hub.send(client, text);
  }

  /**
   * The credential of an `auth` message: a token that verifies, of the same role and user
   * as the socket's, whose claims still pass the channel's audience and, for an
   * `as: subscriber` socket, still fall in its group (else it must reconnect into the group
   * of what its new claims let it read). null: refused; 'unavailable': it could not be
   * checked.
   */
  private async reauthenticate(channel: string, current: Credential, token: string, groupId: string | null): Promise<Credential | null | 'unavailable'> {
    let next: Credential;
    try {
      next = await this.deps.credentials.verify(token);
    } catch {
      return null;
    }
    if (next.role !== current.role || next.userId !== current.userId) return null;
    try {
      const access = await q.access(this.sql, channel, next.claims);
      if (!access.allowed) return null;
      if (groupId !== null && (await q.groupOf(this.sql, channel, next.role, next.claims)) !== groupId) return null;
    } catch (err) {
      this.deps.log.debug({ err }, 'live: audience check of an auth message failed');
      return 'unavailable';
    }
    return next;
  }

  private presence(client: Client, state: string): void {
    client.state = state;
    client.batch = null; // later broadcasts go after this presence message
    this.enqueue(client, () => q.presenceSet(this.sql, this.instanceId, this.bcChannel, client.channel, client.id, state));
  }

  /** A client's database work runs in order; a failure (a payload too large for NOTIFY, the database away) drops that message only. */
  private enqueue(client: Client, work: () => Promise<void>): void {
    client.queue = client.queue.then(work).catch((err: unknown) => {
      this.deps.log.debug({ err, client: client.id }, 'live: client message dropped');
    });
  }

  /** Shutdown, first step (before the HTTP server closes): every socket gets 1012 (service restart: reconnect, elsewhere). */
  async closeSockets(): Promise<void> {
    await Promise.all(this.taps.map((tap) => tap.closeSockets()));
    const clients = this.hub.all();
    if (clients.length === 0) return;
    await new Promise<void>((resolve) => {
      let open = clients.length;
      const done = () => {
        if (--open === 0) resolve();
      };
      for (const c of clients) {
        if (c.ws.readyState === c.ws.CLOSED) done();
        else {
          c.ws.once('close', done);
          c.ws.close(1012, 'service restart');
        }
      }
      setTimeout(() => {
        for (const c of clients) c.ws.terminate();
        resolve();
      }, 1000).unref();
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    await this.poller.stop();
    await this.closeSockets();
    await Promise.all(this.hub.all().map((c) => c.queue));
    await q.instanceStop(this.sql, this.instanceId, this.bcChannel).catch(() => {});
    for (const u of this.unlisten) await u().catch(() => {});
  }
}

/**
 * Area objects are shared by every service in a process (tests run two instances side by
 * side), so each app gets its own LiveService, decorated as `app.live`, and closes it in its
 * own hooks: preClose sends 1012 to every socket, onClose stops the heartbeat, removes this
 * instance's presence (announcing presence_leave) and stops listening.
 */
export const liveArea: Area = {
  name: 'live',
  async register(app, deps) {
    const svc = new LiveService(deps);
    app.decorate('live', svc);
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
      preValidation: async (req) => {
        const admission = await svc.admit(req, req.params.query_id, req.ws);
        if (!req.ws) throw LIVE_ERRORS.upgradeRequired();
        admitted.set(req, admission);
      },
      handler: async () => {
        throw LIVE_ERRORS.upgradeRequired();
      },
      wsHandler: (socket, req) => {
        const admission = admitted.get(req);
        if (admission === undefined) return socket.close(1011, 'not admitted'); // every upgrade passes preValidation first
        svc.connect(socket, req.params.query_id, admission);
      },
    });

    registerRealtime(app, svc, deps, INSTANCE_TTL);

    app.get<{ Params: { channel: string } }>('/ws/_presence/:channel', async (req, reply) => {
      await svc.admit(req, req.params.channel, false);
      let body: string;
      try {
        body = await q.presenceList(svc.sql, req.params.channel, INSTANCE_TTL);
      } catch (err) {
        throw LIVE_ERRORS.metadata(err);
      }
      reply.header('cache-control', 'no-store');
      return sendJsonText(reply, 200, body);
    });

    app.addHook('onReady', async () => {
      await svc.start();
    });
    app.addHook('onClose', async () => {
      await svc.close();
    });
  },
};

declare module 'fastify' {
  interface FastifyInstance {
    live?: LiveService;
  }
}
