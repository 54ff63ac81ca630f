/**
 * One socket of `GET /realtime/v1/websocket` (docs/api/realtime.md): Phoenix's channel
 * protocol as realtime-js 2.x speaks it. `phx_join` (with `config.postgres_changes`,
 * `broadcast`, `presence`, `access_token`), `phx_leave`, `heartbeat`, `access_token`,
 * `broadcast` and `presence` pushes; replies, `postgres_changes`, `broadcast`,
 * `presence_state`, `presence_diff`, `system` and `phx_close` from the server. The rules
 * (who may read which row) stay in SQL: a table subscription joins the live engine's group
 * of its role and claims; broadcast and presence are plinth's channels.
 */
import type { WebSocket } from 'ws';
import type { Credential } from '../../core/credentials.ts';
import * as q from '../db.ts';
import { routeOfGroup } from '../hub.ts';
import { realtimeJoin } from './db.ts';
import { parseFilter, wantOf } from './filter.ts';
import { decodeBinary, decodeText, encode, encodeBroadcast, reply, type Frame, type Vsn } from './frames.ts';
import { newChannel, presenceState, type JoinedChannel, type TableSub } from './channel.ts';
import type { Deps } from '../../core/area.ts';
import type { LiveEngine } from '../tap.ts';

/** setTimeout's longest delay. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Payload + channel bytes a broadcast may have (a NOTIFY payload with its envelope). */
const MAX_BROADCAST_BYTES = 7800;
const EVENTS: ReadonlySet<string> = new Set(['INSERT', 'UPDATE', 'DELETE', '*']);

let nextSubId = 1;

/** What a socket needs of the realtime service (service.ts). */
export interface Host {
  readonly deps: Deps;
  readonly live: LiveEngine;
  readonly instanceId: string;
  readonly instanceTtl: number;
  readonly conns: Set<Connection>;
  readonly sql: Deps['db']['sql'];
  route(sub: TableSub, conn: Connection): void;
  unroute(sub: TableSub): void;
}

export class Connection {
  readonly ws: WebSocket;
  readonly vsn: Vsn;
  readonly channels = new Map<string, JoinedChannel>();
  alive = true;
  private readonly rt: Host;
  private readonly cred: Credential;

  constructor(rt: Host, ws: WebSocket, vsn: Vsn, cred: Credential) {
    this.rt = rt;
    this.ws = ws;
    this.vsn = vsn;
    this.cred = cred;
    ws.on('pong', () => {
      this.alive = true;
    });
    ws.on('message', (data, isBinary) => {
      const buf = Buffer.isBuffer(data) ? data : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]);
      const frame = isBinary ? decodeBinary(buf) : decodeText(vsn, buf.toString('utf8'));
      if (frame !== null) void this.handle(frame);
    });
    ws.on('close', () => {
      for (const ch of [...this.channels.values()]) this.drop(ch);
      this.rt.conns.delete(this);
    });
  }

  send(data: string | Buffer): void {
    const ws = this.ws;
    if (ws.readyState !== ws.OPEN) return;
    if (ws.bufferedAmount > 4 << 20) {
      ws.terminate();
      return;
    }
    ws.send(data, { binary: typeof data !== 'string' });
  }

  push(topic: string, event: string, payload: unknown, joinRef: string | null = null): void {
    this.send(encode(this.vsn, { join_ref: joinRef, ref: null, topic, event, payload }));
  }

  private async handle(f: Frame): Promise<void> {
    if (f.topic === 'phoenix' && f.event === 'heartbeat') {
      this.send(reply(this.vsn, f, 'ok', {}));
      return;
    }
    if (f.event === 'phx_join') {
      await this.join(f);
      return;
    }
    const ch = this.channels.get(f.topic);
    if (ch === undefined) {
      this.send(reply(this.vsn, f, 'error', { reason: 'unmatched topic' }));
      return;
    }
    const payload = (f.payload ?? {}) as Record<string, unknown>;
    switch (f.event) {
      case 'phx_leave':
        this.drop(ch);
        this.send(reply(this.vsn, f, 'ok', {}));
        return;
      case 'access_token':
        await this.swapToken(ch, f, payload.access_token);
        return;
      case 'broadcast':
        this.broadcast(ch, f, payload);
        return;
      case 'presence':
        this.presence(ch, f, payload);
        return;
      default:
        this.send(reply(this.vsn, f, 'error', { reason: `unknown event ${f.event}` }));
    }
  }

  /** The credential of a join or a swap: its `access_token`, else the socket's. */
  private async credentialOf(token: unknown): Promise<Credential | null> {
    if (typeof token !== 'string' || token === '') return this.cred;
    try {
      return await this.rt.deps.credentials.verify(token);
    } catch {
      return null;
    }
  }

  private async join(f: Frame): Promise<void> {
    const payload = (f.payload ?? {}) as { config?: unknown; access_token?: unknown };
    const config = (payload.config !== null && typeof payload.config === 'object' ? payload.config : {}) as Record<string, unknown>;
    const refuse = (reason: string) => this.send(reply(this.vsn, f, 'error', { reason }));
    const cred = await this.credentialOf(payload.access_token);
    if (cred === null) return refuse('invalid or expired token');
    const real = cred.role === 'authenticated' || cred.role === 'service_role';
    if (this.rt.deps.config.requireAuthenticatedWs && !real) return refuse('authentication required');
    const old = this.channels.get(f.topic);
    if (old !== undefined) this.drop(old);
    const ch = newChannel(f.topic, f.join_ref, cred, config);
    // A channel named like a registered live query keeps its audience (docs/api/live.md).
    try {
      const access = await q.access(this.rt.sql, ch.name, cred.claims);
      if (access.bound && cred.role === 'anon') return refuse('authentication required');
      if (!access.allowed) return refuse('audience not satisfied');
    } catch {
      return refuse('subscription metadata unavailable');
    }
    const wanted = Array.isArray(config.postgres_changes) ? (config.postgres_changes as unknown[]) : [];
    if (wanted.length > this.rt.deps.config.realtimeMaxSubscriptions - this.subscriptionCount()) {
      return refuse(`too many table subscriptions on this socket (REALTIME_MAX_SUBSCRIPTIONS is ${this.rt.deps.config.realtimeMaxSubscriptions})`);
    }
    const accepted: object[] = [];
    for (const w of wanted) {
      const made = await this.tableSub(ch, w);
      if (typeof made === 'string') {
        for (const s of ch.subs) this.rt.unroute(s);
        return refuse(made);
      }
      accepted.push(made);
    }
    this.channels.set(f.topic, ch);
    this.arm(ch);
    this.send(reply(this.vsn, f, 'ok', { postgres_changes: accepted }));
    if (ch.subs.length > 0) {
      this.push(f.topic, 'system', { extension: 'postgres_changes', status: 'ok', message: 'Subscribed to PostgreSQL', channel: ch.name }, ch.joinRef);
    }
    if (ch.presenceEnabled) {
      try {
        const list = JSON.parse(await q.presenceList(this.rt.sql, ch.name, this.rt.instanceTtl)) as Record<string, unknown>;
        if (this.channels.get(f.topic) === ch) this.push(f.topic, 'presence_state', presenceState(list), ch.joinRef);
      } catch {
        // The database is away: presence_diff messages follow as clients come and go.
      }
    }
  }

  private subscriptionCount(): number {
    let n = 0;
    for (const ch of this.channels.values()) n += ch.subs.length;
    return n;
  }

  /** One entry of `config.postgres_changes`: its reply entry, or why it is refused. */
  private async tableSub(ch: JoinedChannel, w: unknown): Promise<object | string> {
    if (w === null || typeof w !== 'object') return 'invalid postgres_changes entry';
    const { event, schema, table, filter } = w as { event?: unknown; schema?: unknown; table?: unknown; filter?: unknown };
    const ev = typeof event === 'string' ? event.toUpperCase() : '';
    if (!EVENTS.has(ev)) return 'event must be INSERT, UPDATE, DELETE or *';
    if (schema !== 'public') return 'only the public schema can be subscribed to';
    if (typeof table !== 'string' || table === '') return 'table is required';
    if (filter !== undefined && filter !== null && typeof filter !== 'string') return 'filter must be a string';
    // Parsed first without the table's columns (what it may want goes with the join), checked against them after.
    const wanted = parseFilter(filter, null, this.rt.deps.config.realtimeMaxFilters);
    if (typeof wanted === 'string') return wanted;
    const want = wantOf(ev, wanted);
    let joined;
    try {
      joined = await realtimeJoin(this.rt.sql, this.rt.instanceId, table, ch.cred.role, ch.cred.claims, want);
    } catch (err) {
      if ((err as { code?: unknown }).code === '54000') return 'live query group limit reached';
      return 'subscription metadata unavailable';
    }
    if (joined.error === 'permission denied') return `permission denied for table ${table}`;
    if (joined.error !== null || joined.group_id === null) return `table ${table} not found`;
    const conditions = parseFilter(filter, joined.cols ?? [], this.rt.deps.config.realtimeMaxFilters);
    if (typeof conditions === 'string') return conditions;
    const sub: TableSub = {
      id: nextSubId++,
      channel: ch,
      route: routeOfGroup(joined.group_id),
      groupId: joined.group_id,
      queryId: joined.query_id!,
      table,
      event: ev as TableSub['event'],
      conditions,
      want,
      pk: joined.pk ?? [],
    };
    ch.subs.push(sub);
    this.rt.route(sub, this);
    return { id: sub.id, event, schema, table, ...(typeof filter === 'string' ? { filter } : {}) };
  }

  /** The channel is closed with a `system` error when its token's `exp` passes. */
  private arm(ch: JoinedChannel): void {
    if (ch.expiry !== null) clearTimeout(ch.expiry);
    ch.expiry = null;
    if (!Number.isFinite(ch.cred.exp)) return;
    const ms = ch.cred.exp * 1000 - Date.now();
    if (ms <= 0) {
      this.close(ch, 'token expired');
      return;
    }
    ch.expiry = setTimeout(() => (ms > MAX_TIMER_MS ? this.arm(ch) : this.close(ch, 'token expired')), Math.min(ms, MAX_TIMER_MS));
    ch.expiry.unref();
  }

  /** The server ends a channel: a `system` error saying why, then `phx_close`. */
  close(ch: JoinedChannel, message: string): void {
    if (this.channels.get(ch.topic) !== ch) return;
    this.push(ch.topic, 'system', { extension: 'system', status: 'error', message, channel: ch.name }, ch.joinRef);
    this.push(ch.topic, 'phx_close', {}, ch.joinRef);
    this.drop(ch);
  }

  /** The server's error on a channel: a `system` error for postgres_changes, then `phx_error` (realtime-js reports CHANNEL_ERROR and rejoins). */
  fail(ch: JoinedChannel, message: string): void {
    if (this.channels.get(ch.topic) !== ch) return;
    this.push(ch.topic, 'system', { extension: 'postgres_changes', status: 'error', message, channel: ch.name }, ch.joinRef);
    this.push(ch.topic, 'phx_error', {}, ch.joinRef);
    this.drop(ch);
  }

  /**
   * `access_token`: the channel's credential becomes the new token's. Each table
   * subscription moves to the group of the new role and claims (a token of another user
   * sees that user's rows from then on, as Supabase does); a token that does not verify, or
   * whose role may not read a subscribed table, closes the channel.
   */
  private async swapToken(ch: JoinedChannel, f: Frame, token: unknown): Promise<void> {
    const next = typeof token === 'string' && token !== '' ? await this.credentialOf(token) : null;
    if (this.channels.get(ch.topic) !== ch) return;
    if (next === null) return this.close(ch, 'invalid token');
    if (this.rt.deps.config.requireAuthenticatedWs && next.role !== 'authenticated' && next.role !== 'service_role') {
      return this.close(ch, 'authentication required');
    }
    try {
      for (const s of ch.subs) {
        const j = await realtimeJoin(this.rt.sql, this.rt.instanceId, s.table, next.role, next.claims, s.want);
        if (j.group_id === null) return this.close(ch, j.error === 'permission denied' ? `permission denied for table ${s.table}` : `table ${s.table} not found`);
        if (j.group_id === s.groupId) continue;
        this.rt.unroute(s);
        s.groupId = j.group_id;
        s.route = routeOfGroup(j.group_id);
        if (this.channels.get(ch.topic) === ch) this.rt.route(s, this);
      }
    } catch {
      // The database is away: the current credential and deadline stand.
      this.send(reply(this.vsn, f, 'error', { reason: 'subscription metadata unavailable' }));
      return;
    }
    ch.cred = next;
    this.arm(ch);
    this.send(reply(this.vsn, f, 'ok', {}));
  }

  private broadcast(ch: JoinedChannel, f: Frame, payload: Record<string, unknown>): void {
    const event = typeof payload.event === 'string' ? payload.event : '';
    const text = JSON.stringify({ event, payload: payload.payload ?? null });
    if (event === '' || Buffer.byteLength(text) + Buffer.byteLength(ch.name) > MAX_BROADCAST_BYTES) {
      if (ch.ack) this.send(reply(this.vsn, f, 'error', { reason: event === '' ? 'event is required' : 'payload too large' }));
      return;
    }
    this.enqueue(ch, async () => {
      try {
        await q.broadcast(this.rt.sql, this.rt.live.bcChannel, ch.name, ch.clientId, text);
        if (ch.ack) this.send(reply(this.vsn, f, 'ok', {}));
      } catch {
        if (ch.ack) this.send(reply(this.vsn, f, 'error', { reason: 'broadcast failed' }));
      }
    });
  }

  private presence(ch: JoinedChannel, f: Frame, payload: Record<string, unknown>): void {
    const { live } = this.rt;
    if (payload.event === 'track') {
      const state = payload.payload !== null && typeof payload.payload === 'object' && !Array.isArray(payload.payload) ? payload.payload : {};
      ch.tracked = true;
      ch.trackedState = JSON.stringify(state);
      this.enqueue(ch, async () => {
        await q.presenceSet(this.rt.sql, live.instanceId, live.bcChannel, ch.name, ch.presenceId, JSON.stringify(state));
        this.send(reply(this.vsn, f, 'ok', {}));
      });
    } else if (payload.event === 'untrack') {
      ch.tracked = false;
      this.enqueue(ch, async () => {
        await q.presenceLeave(this.rt.sql, live.bcChannel, ch.name, ch.presenceId);
        this.send(reply(this.vsn, f, 'ok', {}));
      });
    } else {
      this.send(reply(this.vsn, f, 'error', { reason: 'presence event must be track or untrack' }));
    }
  }

  /** This instance had been declared dead: each tracked presence is announced again (a join for the others). */
  reannounce(): void {
    const { live } = this.rt;
    for (const ch of this.channels.values()) {
      if (!ch.tracked) continue;
      const state = ch.trackedState;
      this.enqueue(ch, () => q.presenceSet(this.rt.sql, live.instanceId, live.bcChannel, ch.name, ch.presenceId, state));
    }
  }

  private enqueue(ch: JoinedChannel, work: () => Promise<void>): void {
    ch.queue = ch.queue.then(work).catch(() => {});
  }

  /** The channel goes: its table subscriptions leave their routes, its presence leaves. */
  drop(ch: JoinedChannel): void {
    if (this.channels.get(ch.topic) === ch) this.channels.delete(ch.topic);
    if (ch.expiry !== null) clearTimeout(ch.expiry);
    ch.expiry = null;
    for (const s of ch.subs) this.rt.unroute(s);
    ch.subs = [];
    if (ch.tracked) {
      ch.tracked = false;
      const { live } = this.rt;
      this.enqueue(ch, () => q.presenceLeave(this.rt.sql, live.bcChannel, ch.name, ch.presenceId));
    }
  }

  /** A broadcast of plinth's channel `name` to this socket's channel of that name. */
  deliverBroadcast(ch: JoinedChannel, from: unknown, event: string, payloadJson: string): void {
    if (from === ch.clientId && !ch.self) return;
    this.send(encodeBroadcast(this.vsn, ch.topic, event, payloadJson));
  }
}
