/**
 * The live engine of one service instance (docs/api/live.md): the sockets of this instance
 * (hub.ts), routed by subscription or, for `as: subscriber`, by group; one LISTEN (on the
 * instance's listener connection) for LIVE_CHANNEL and `<LIVE_CHANNEL>_bc`; the heartbeat
 * that keeps this instance, its groups and its clients' presence alive; the admission of
 * an upgrade (origin, connection caps, credential, audience, the group of an
 * `as: subscriber` subscription). When the listener comes back after a gap, every route
 * whose seq moved on is sent one `overflow`, so no client misses a change silently. A
 * broken subscription's sockets get an `error` message and close 4002.
 *
 * The registry, snapshots, groups and diffs live in SQL (sql/fixtures/live); the poller
 * (poller.ts) re-runs what writers marked, off their path. What one socket says and hears
 * is socket.ts; the routes are routes.ts.
 */
import type { FastifyRequest } from 'fastify';
import type { WebSocket } from 'ws';
import type { Deps } from '../core/area.ts';
import type { Credential } from '../core/credentials.ts';
import { clientIp } from '../core/http.ts';
import { originsFor } from '../core/origins.ts';
import { presentedCredential } from './credential.ts';
import * as q from './db.ts';
import { Hub, routeOfGroup, type Client } from './hub.ts';
import { Poller, runAs } from './poller.ts';
import { CLOSE_BROKEN, INSTANCE_TTL, LIVE_ERRORS, type Admission } from './protocol.ts';
import { LiveSocket, type SocketHost } from './socket.ts';
import type { LiveTap } from './tap.ts';

const HEARTBEAT_MS = 1000;

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
  private readonly socketHost: SocketHost;

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
    this.socketHost = {
      hub: this.hub,
      sql: deps.db.sql,
      bcChannel: this.bcChannel,
      groupConnected: (id) => this.pendingGroups.delete(id),
      reauthenticate: (channel, current, token, groupId) => this.reauthenticate(channel, current, token, groupId),
      sendSnapshot: (client, groupId) => this.sendSnapshot(client, groupId),
      enqueue: (client, work) => this.enqueue(client, work),
      presence: (client, state) => this.presence(client, state),
      leaveLater: (leave) => this.pendingLeaves.push(leave),
    };
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
      for (const tap of this.taps) tap.broken(msg.query_id);
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
        for (const tap of this.taps) tap.reannounce();
      }
      // Table subscriptions nobody has joined for REALTIME_IDLE_MS go with their triggers.
      await q.realtimeSweep(this.deps.db.sql, this.deps.config.realtimeIdleMs);
    } catch (err) {
      this.deps.log.debug({ err }, 'live: heartbeat failed');
    } finally {
      this.beating = false;
    }
  }

  /** The caller's credential for /ws (an admin's token below aal2 checked as on REST: core/credentials.ts). */
  async credential(req: FastifyRequest): Promise<Credential> {
    return this.deps.credentials.aalChecked(await presentedCredential(this.deps, req));
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

  /** A new socket on `channel`, let in as `admission` says (socket.ts speaks the protocol from here). */
  connect(ws: WebSocket, channel: string, admission: Admission): void {
    new LiveSocket(this.socketHost, ws, channel, admission);
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
