/**
 * Channels in supabase-js's shape over plinth's `/realtime/v1` endpoint (docs/client.md,
 * docs/api/realtime.md): `plinth.channel(name).on('postgres_changes', {event, schema,
 * table, filter}, cb)`, `on('broadcast', {event}, cb)`, `on('presence', {event}, cb)`,
 * `subscribe(cb)`, `send`, `track`, `untrack`, `unsubscribe`. One socket per client (the
 * Phoenix protocol, vsn 1.0.0: JSON objects), opened with the first channel; it reconnects
 * with a capped backoff and joins its channels again, each with the current token, and
 * sends `access_token` to every channel when the token changes.
 */
import type { WebSocketLike } from './socket.ts';

export type ChannelStatus = 'SUBSCRIBED' | 'CHANNEL_ERROR' | 'TIMED_OUT' | 'CLOSED';

export interface PostgresChange {
  schema: string;
  table: string;
  commit_timestamp: string;
  eventType: 'INSERT' | 'UPDATE' | 'DELETE';
  new: Record<string, unknown>;
  old: Record<string, unknown>;
  errors: string[] | null;
}

export interface ChannelOptions {
  broadcast?: { self?: boolean; ack?: boolean };
  presence?: { key?: string };
}

interface Binding {
  type: 'postgres_changes' | 'broadcast' | 'presence';
  filter: Record<string, string | undefined>;
  cb: (payload: never) => void;
  id?: number;
}

export interface RealtimeHost {
  url: string;
  anonKey: string;
  getToken(): Promise<string | null>;
  WebSocket?: new (url: string) => WebSocketLike;
}

const TIMEOUT_MS = 10_000;
const HEARTBEAT_MS = 25_000;

export class RealtimeChannel {
  readonly topic: string;
  state: 'closed' | 'joining' | 'joined' = 'closed';
  private readonly bindings: Binding[] = [];
  private readonly options: ChannelOptions;
  private readonly socket: RealtimeSocket;
  private statusCb: ((s: ChannelStatus, err?: Error) => void) | null = null;
  private presence: Record<string, Array<Record<string, unknown>>> = {};

  constructor(socket: RealtimeSocket, name: string, options: ChannelOptions) {
    this.socket = socket;
    this.topic = `realtime:${name}`;
    this.options = options;
  }

  on(type: 'postgres_changes', filter: { event: string; schema: string; table: string; filter?: string }, cb: (change: PostgresChange) => void): this;
  on(type: 'broadcast', filter: { event: string }, cb: (msg: { type: 'broadcast'; event: string; payload: unknown }) => void): this;
  on(type: 'presence', filter: { event: 'sync' | 'join' | 'leave' }, cb: (p: { key?: string }) => void): this;
  on(type: Binding['type'], filter: Record<string, string | undefined>, cb: (payload: never) => void): this {
    this.bindings.push({ type, filter, cb });
    return this;
  }

  /** Joins the channel; `cb` hears SUBSCRIBED, CHANNEL_ERROR (with the server's reason), TIMED_OUT or CLOSED. */
  subscribe(cb?: (status: ChannelStatus, err?: Error) => void): this {
    this.statusCb = cb ?? null;
    this.socket.add(this);
    return this;
  }

  /** @internal The join's payload. */
  async joinPayload(): Promise<object> {
    return {
      config: {
        broadcast: { self: this.options.broadcast?.self === true, ack: this.options.broadcast?.ack === true },
        presence: { key: this.options.presence?.key ?? '', enabled: this.bindings.some((b) => b.type === 'presence') },
        postgres_changes: this.bindings.filter((b) => b.type === 'postgres_changes').map((b) => b.filter),
      },
      access_token: (await this.socket.host.getToken()) ?? this.socket.host.anonKey,
    };
  }

  /** @internal The join's reply. */
  joined(status: string, response: { postgres_changes?: Array<{ id: number }>; reason?: string }): void {
    if (status !== 'ok') {
      this.state = 'closed';
      this.socket.remove(this);
      this.statusCb?.('CHANNEL_ERROR', new Error(response.reason ?? 'error'));
      return;
    }
    const pg = this.bindings.filter((b) => b.type === 'postgres_changes');
    pg.forEach((b, i) => (b.id = response.postgres_changes?.[i]?.id));
    this.state = 'joined';
    this.statusCb?.('SUBSCRIBED');
  }

  /** @internal A message of this channel. */
  receive(event: string, payload: Record<string, unknown>): void {
    if (event === 'phx_close') {
      this.state = 'closed';
      this.socket.remove(this);
      this.statusCb?.('CLOSED');
    } else if (event === 'postgres_changes') {
      const ids = payload.ids as number[];
      const d = payload.data as { schema: string; table: string; commit_timestamp: string; type: PostgresChange['eventType']; record: object; old_record: object; errors: string[] | null };
      const change = { schema: d.schema, table: d.table, commit_timestamp: d.commit_timestamp, eventType: d.type, new: d.record, old: d.old_record, errors: d.errors } as PostgresChange;
      for (const b of this.bindings) if (b.type === 'postgres_changes' && b.id !== undefined && ids.includes(b.id)) (b.cb as (c: PostgresChange) => void)(change);
    } else if (event === 'broadcast') {
      for (const b of this.bindings) if (b.type === 'broadcast' && (b.filter.event === '*' || b.filter.event === payload.event)) (b.cb as (p: object) => void)(payload);
    } else if (event === 'presence_state' || event === 'presence_diff') {
      this.presenceChange(event, payload);
    }
  }

  private presenceChange(event: string, payload: Record<string, unknown>): void {
    type Metas = Record<string, { metas: Array<Record<string, unknown>> }>;
    const fire = (kind: string, key?: string) => {
      for (const b of this.bindings) if (b.type === 'presence' && b.filter.event === kind) (b.cb as (p: object) => void)({ key });
    };
    const joins = (event === 'presence_state' ? payload : payload.joins) as Metas;
    if (event === 'presence_state') this.presence = {};
    for (const [key, { metas }] of Object.entries(joins ?? {})) {
      const refs = new Set(metas.map((m) => m.phx_ref));
      this.presence[key] = [...(this.presence[key] ?? []).filter((m) => !refs.has(m.phx_ref)), ...metas];
      fire('join', key);
    }
    for (const [key, { metas }] of Object.entries(((payload.leaves ?? {}) as Metas))) {
      const refs = new Set(metas.map((m) => m.phx_ref));
      const left = (this.presence[key] ?? []).filter((m) => !refs.has(m.phx_ref));
      if (left.length > 0) this.presence[key] = left;
      else delete this.presence[key];
      fire('leave', key);
    }
    fire('sync');
  }

  /** The presence of the channel: key → the states tracked under it. */
  presenceState(): Record<string, Array<Record<string, unknown>>> {
    return this.presence;
  }

  /** A broadcast (`{type: 'broadcast', event, payload}`): 'ok' (acknowledged when `ack`), 'error' or 'timed out'. */
  send(msg: { type: 'broadcast'; event: string; payload?: unknown }): Promise<string> {
    const p = this.socket.push(this.topic, 'broadcast', msg);
    return this.options.broadcast?.ack === true ? p : Promise.resolve('ok');
  }

  track(state: Record<string, unknown>): Promise<string> {
    return this.socket.push(this.topic, 'presence', { type: 'presence', event: 'track', payload: state });
  }

  untrack(): Promise<string> {
    return this.socket.push(this.topic, 'presence', { type: 'presence', event: 'untrack' });
  }

  /** Leaves the channel. */
  async unsubscribe(): Promise<string> {
    const r = this.state === 'closed' ? 'ok' : await this.socket.push(this.topic, 'phx_leave', {});
    this.state = 'closed';
    this.socket.remove(this);
    this.statusCb?.('CLOSED');
    return r;
  }
}

/** The client's one socket: refs, replies, heartbeats, reconnects. */
export class RealtimeSocket {
  readonly host: RealtimeHost;
  private ws: WebSocketLike | null = null;
  private readonly channels = new Set<RealtimeChannel>();
  private readonly replies = new Map<string, (status: string, response: Record<string, unknown>) => void>();
  private ref = 0;
  private attempt = 0;
  private heartbeat: ReturnType<typeof setInterval> | null = null;

  constructor(host: RealtimeHost) {
    this.host = host;
  }

  add(ch: RealtimeChannel): void {
    this.channels.add(ch);
    if (this.ws === null) this.open();
    else if (this.ws.readyState === 1) void this.join(ch);
  }

  remove(ch: RealtimeChannel): void {
    this.channels.delete(ch);
    if (this.channels.size === 0 && this.ws !== null) {
      const ws = this.ws;
      this.ws = null;
      if (this.heartbeat !== null) clearInterval(this.heartbeat);
      ws.close(1000, 'no channels');
    }
  }

  /** Sends the current token to every joined channel (after a sign-in or a refresh). */
  async setAuth(): Promise<void> {
    const token = (await this.host.getToken()) ?? this.host.anonKey;
    for (const ch of this.channels) if (ch.state === 'joined') void this.push(ch.topic, 'access_token', { access_token: token });
  }

  push(topic: string, event: string, payload: unknown): Promise<string> {
    const ws = this.ws;
    if (ws === null || ws.readyState !== 1) return Promise.resolve('error');
    const ref = String(++this.ref);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.replies.delete(ref);
        resolve('timed out');
      }, TIMEOUT_MS);
      this.replies.set(ref, (status) => {
        clearTimeout(timer);
        resolve(status === 'ok' ? 'ok' : 'error');
      });
      ws.send(JSON.stringify({ topic, event, payload, ref, join_ref: null }));
    });
  }

  private async join(ch: RealtimeChannel): Promise<void> {
    const ws = this.ws;
    if (ws === null) return;
    ch.state = 'joining';
    const payload = await ch.joinPayload();
    const ref = String(++this.ref);
    this.replies.set(ref, (status, response) => ch.joined(status, response));
    ws.send(JSON.stringify({ topic: ch.topic, event: 'phx_join', payload, ref, join_ref: ref }));
  }

  private open(): void {
    const WS = this.host.WebSocket ?? (globalThis as unknown as { WebSocket: new (url: string) => WebSocketLike }).WebSocket;
    const url = `${this.host.url.replace(/^http/, 'ws')}/realtime/v1/websocket?apikey=${encodeURIComponent(this.host.anonKey)}&vsn=1.0.0`;
    const ws = new WS(url);
    this.ws = ws;
    ws.onopen = () => {
      this.attempt = 0;
      for (const ch of this.channels) void this.join(ch);
      this.heartbeat = setInterval(() => void this.push('phoenix', 'heartbeat', {}), HEARTBEAT_MS);
    };
    ws.onmessage = (ev) => {
      let m: { topic?: string; event?: string; payload?: Record<string, unknown>; ref?: string | null };
      try {
        m = JSON.parse(String(ev.data)) as typeof m;
      } catch {
        return;
      }
      if (m.event === 'phx_reply' && typeof m.ref === 'string') {
        const done = this.replies.get(m.ref);
        this.replies.delete(m.ref);
        const p = m.payload ?? {};
        done?.(String(p.status), (p.response ?? {}) as Record<string, unknown>);
        return;
      }
      for (const ch of this.channels) if (ch.topic === m.topic) ch.receive(m.event ?? '', m.payload ?? {});
    };
    ws.onclose = () => {
      if (this.heartbeat !== null) clearInterval(this.heartbeat);
      this.heartbeat = null;
      if (this.ws !== ws) return;
      this.ws = null;
      for (const ch of this.channels) ch.state = 'closed';
      if (this.channels.size === 0) return;
      // Back again, with every channel joined anew (the token of that moment).
      const delay = Math.min(2000, 100 * 2 ** this.attempt++);
      setTimeout(() => {
        if (this.ws === null && this.channels.size > 0) this.open();
      }, delay);
    };
    ws.onerror = () => {};
  }
}
