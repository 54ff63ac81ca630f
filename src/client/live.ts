/**
 * Live queries over WebSocket (docs/api/live.md; docs/client.md): one
 * connection to `/ws/{queryId}` with the session's token, reconnecting with backoff and a
 * fresh token, and a result set kept for the caller. The token travels in the
 * `Sec-WebSocket-Protocol` header (subprotocols `plinth` and `base64url.bearer.<token>`),
 * never in the URL, where proxies and servers log it; a refreshed token is sent on the open
 * socket as `{type: auth, token}`, so the socket outlives the token it opened with (the
 * server closes a socket with 4001 when its token expires). Deltas are applied. The whole
 * result is loaded after each `subscribed`, a `seq` gap and an `overflow`: from the service
 * (`{type: snapshot}`, answered with its stored result and the seq it is at, so a delta the
 * result already holds is dropped by its seq: decision 0300) when `subscribed` says it
 * can, else through the caller's `refetch()`; an `invalidated` calls `refetch()`.
 * Broadcast and presence ride on the same connection (the channel is the query id).
 */
import { PlinthError, networkError, type Fetch } from './http.ts';
import { ResultSet, SeqTracker, type Delta, type Row } from './result-set.ts';
import { bearerProtocols, type WebSocketConstructor, type WebSocketLike } from './socket.ts';

export { ResultSet, SeqTracker, canonical, type Delta, type Row } from './result-set.ts';
export { bearerProtocols, type WebSocketConstructor, type WebSocketLike } from './socket.ts';

/** What a refetch failed with, as an Error. */
function asError(e: unknown): Error {
  return e instanceof Error ? e : new PlinthError(String((e as { message?: string } | null)?.message ?? e), 0);
}

export type RefetchResult = Row[] | { data: Row[] | null; error: unknown } | null | undefined;

export interface LiveOptions {
  /** Loads the whole result (for example `() => client.from('todos').select()`). */
  refetch?: () => PromiseLike<RefetchResult> | RefetchResult;
  /** Reconnect delays: from `minDelayMs` doubling up to `maxDelayMs` (with jitter). */
  minDelayMs?: number;
  maxDelayMs?: number;
  /** Another WebSocket implementation (default: the global one). */
  WebSocket?: WebSocketConstructor;
}

export type LiveStatus = 'connecting' | 'subscribed' | 'closed';
export type PresenceMap = Record<string, Record<string, unknown>>;

export interface LiveEvents {
  change: (rows: Row[]) => void;
  broadcast: (payload: unknown, from: string) => void;
  presence: (presence: PresenceMap) => void;
  status: (status: LiveStatus) => void;
  error: (error: Error) => void;
}

export interface LiveDeps {
  url: string;
  fetch: Fetch;
  anonKey: string;
  /** The session's access token, or null when signed out (the anon key is sent then). */
  getToken: () => Promise<string | null>;
}

const OPEN = 1;

export class LiveQuery {
  readonly queryId: string;
  private readonly deps: LiveDeps;
  private readonly opts: LiveOptions;
  private readonly set = new ResultSet();
  private readonly seq = new SeqTracker();
  private readonly listeners: { [K in keyof LiveEvents]: Set<LiveEvents[K]> } = {
    change: new Set(),
    broadcast: new Set(),
    presence: new Set(),
    status: new Set(),
    error: new Set(),
  };
  private ws: WebSocketLike | null = null;
  private closed = false;
  private attempt = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private fetching: Promise<void> | null = null;
  private fetchAgain = false;
  private pending: Delta[] = [];
  /** The service sends its stored result on request (`subscribed` with `snapshot: true`). */
  private serverSnapshots = false;
  /** A snapshot was asked for: deltas (and overflows) wait in `held` until it comes. */
  private awaiting = false;
  private held: Array<{ seq: number; delta: Delta | null }> = [];
  private tracked: Record<string, unknown> | null = null;
  private presenceMap: PresenceMap = {};
  private presenceTouched = new Set<string>();
  private _status: LiveStatus = 'connecting';
  private _clientId: string | null = null;
  /** How many times `refetch` ran (initial load, gaps, overflows, invalidations, without snapshots from the service). */
  refetches = 0;
  /** How many times the result was loaded from the service's snapshot (the same events, from a service that sends one). */
  snapshots = 0;

  constructor(queryId: string, deps: LiveDeps, opts: LiveOptions = {}) {
    this.queryId = queryId;
    this.deps = deps;
    this.opts = opts;
    void this.connect();
  }

  get rows(): Row[] {
    return this.set.rows;
  }
  get clientId(): string | null {
    return this._clientId;
  }
  get status(): LiveStatus {
    return this._status;
  }
  get presence(): PresenceMap {
    return { ...this.presenceMap };
  }

  on<K extends keyof LiveEvents>(event: K, cb: LiveEvents[K]): () => void {
    this.listeners[event].add(cb);
    return () => {
      this.listeners[event].delete(cb);
    };
  }

  private emit<K extends keyof LiveEvents>(event: K, ...args: Parameters<LiveEvents[K]>): void {
    for (const cb of [...this.listeners[event]]) {
      try {
        (cb as (...a: unknown[]) => void)(...args);
      } catch {
        /* a listener's failure is its own */
      }
    }
  }

  private setStatus(s: LiveStatus): void {
    if (this._status === s) return;
    this._status = s;
    this.emit('status', s);
  }

  private socketUrl(): string {
    const u = new URL(`${this.deps.url}/ws/${encodeURIComponent(this.queryId)}`);
    u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
    return u.toString();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    this.setStatus('connecting');
    let token: string;
    try {
      token = (await this.deps.getToken()) ?? this.deps.anonKey;
    } catch {
      token = this.deps.anonKey;
    }
    if (this.closed) return;
    const WS = this.opts.WebSocket ?? (globalThis as unknown as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WS) {
      this.emit('error', new PlinthError('no WebSocket implementation: pass options.WebSocket', 0));
      return;
    }
    let ws: WebSocketLike;
    try {
      ws = new WS(this.socketUrl(), bearerProtocols(token));
    } catch (e) {
      this.emit('error', networkError(e));
      this.scheduleReconnect();
      return;
    }
    this.ws = ws;
    ws.onmessage = (ev) => {
      if (this.ws !== ws) return;
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(String(ev.data)) as Record<string, unknown>;
      } catch {
        return;
      }
      this.handle(msg, token);
    };
    ws.onerror = () => {
      /* onclose follows */
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this._clientId = null;
      if (this.closed) return;
      if (this._status !== 'subscribed') this.emit('error', new PlinthError(`live query ${this.queryId}: connection failed`, 0));
      else this.emit('error', new PlinthError(`live query ${this.queryId}: connection lost (${ev.code ?? 0})`, 0));
      this.setStatus('connecting');
      this.scheduleReconnect();
    };
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    const min = this.opts.minDelayMs ?? 500;
    const max = this.opts.maxDelayMs ?? 30_000;
    const base = Math.min(max, min * 2 ** this.attempt);
    this.attempt++;
    const delay = base / 2 + Math.random() * (base / 2);
    const t = setTimeout(() => {
      this.reconnectTimer = null;
      void this.connect();
    }, delay);
    (t as { unref?: () => void }).unref?.();
    this.reconnectTimer = t;
  }

  /** Drop the connection and connect again at once (new identity after sign-in or sign-out). */
  reconnect(): void {
    if (this.closed) return;
    const ws = this.ws;
    this.ws = null;
    this._clientId = null;
    if (ws) ws.close(1000, 'reconnect');
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    this.attempt = 0;
    void this.connect();
  }

  /**
   * Send the session's current token on the open socket (after a refresh): the server then
   * keeps the socket past the expiry of the token it opened with. False when not connected.
   */
  async reauthenticate(): Promise<boolean> {
    const ws = this.ws;
    if (!ws || this._status !== 'subscribed') return false;
    let token: string | null;
    try {
      token = await this.deps.getToken();
    } catch {
      return false;
    }
    if (token === null || this.ws !== ws) return false;
    return this.send({ type: 'auth', token });
  }

  private handle(msg: Record<string, unknown>, token: string): void {
    const type = msg.type;
    if (type === 'subscribed') {
      this._clientId = typeof msg.client_id === 'string' ? msg.client_id : null;
      this.attempt = 0;
      this.seq.reset();
      this.serverSnapshots = msg.snapshot === true;
      this.awaiting = false;
      this.held = [];
      this.presenceMap = {};
      this.presenceTouched = new Set();
      this.setStatus('subscribed');
      if (this.tracked) this.send({ type: 'presence', state: this.tracked });
      void this.loadPresence(token);
      this.reload();
      return;
    }
    if (type === undefined && typeof msg.seq === 'number') {
      if (this.awaiting) this.held.push({ seq: msg.seq, delta: msg as unknown as Delta });
      else this.onDelta(msg as unknown as Delta);
      return;
    }
    if (type === 'snapshot') {
      this.onSnapshot(msg);
      return;
    }
    if (type === 'overflow' && this.awaiting) {
      if (typeof msg.seq === 'number') this.held.push({ seq: msg.seq, delta: null });
      return;
    }
    if (type === 'invalidated' || type === 'overflow') {
      if (typeof msg.seq === 'number') this.seq.next(msg.seq);
      if (type === 'overflow' && this.serverSnapshots) {
        this.requestSnapshot();
        return;
      }
      if (type === 'overflow') {
        this.set.replace([]);
      }
      void this.refetch();
      return;
    }
    if (type === 'error') {
      // The server closes the socket next (4002): the subscription's query is broken, or this
      // subscriber's group went. The reason reaches the caller; reconnecting is left to backoff.
      this.emit('error', new PlinthError(`live query ${this.queryId}: ${typeof msg.error === 'string' ? msg.error : 'error'}`, 0));
      return;
    }
    if (type === 'broadcast') {
      this.emit('broadcast', msg.payload, typeof msg.from === 'string' ? msg.from : '');
      return;
    }
    if (type === 'presence_join' || type === 'presence_state' || type === 'presence_leave') {
      const id = typeof msg.client_id === 'string' ? msg.client_id : '';
      this.presenceTouched.add(id);
      if (type === 'presence_leave') delete this.presenceMap[id];
      else this.presenceMap[id] = (msg.state ?? {}) as Record<string, unknown>;
      this.emit('presence', this.presence);
    }
  }

  private onDelta(d: Delta): void {
    const what = this.seq.next(d.seq);
    if (what === 'old') return;
    if (what === 'gap') {
      this.reload();
      return;
    }
    if (this.fetching) {
      this.pending.push(d);
      return;
    }
    this.set.apply(d);
    this.emit('change', this.rows);
  }

  /** Load the whole result: the service's snapshot when it sends one, else `refetch`. */
  private reload(): void {
    if (this.serverSnapshots) this.requestSnapshot();
    else void this.refetch();
  }

  /**
   * Ask the service for its stored result. What arrives until it comes waits: the result is
   * read after the request, so a delta it already holds has a seq at most its seq.
   */
  private requestSnapshot(): void {
    if (this.awaiting) return; // the answer on its way is read after everything held so far
    if (!this.send({ type: 'snapshot' })) return; // the socket went: the next `subscribed` loads
    this.awaiting = true;
  }

  /** The service's stored result at `seq`: it replaces the rows, then what waited with a later seq applies. */
  private onSnapshot(msg: Record<string, unknown>): void {
    if (!this.awaiting) return;
    this.awaiting = false;
    const held = this.held.sort((a, b) => a.seq - b.seq);
    this.held = [];
    if (!Array.isArray(msg.rows) || typeof msg.seq !== 'number') {
      // Nothing stored to send (notify mode, the database away): the caller's refetch loads it.
      this.serverSnapshots = false;
      for (const h of held) this.seq.next(h.seq);
      void this.refetch();
      return;
    }
    this.snapshots++;
    this.set.replace(msg.rows as Row[]);
    this.seq.last = msg.seq;
    for (const [i, h] of held.entries()) {
      if (h.delta === null) {
        if (h.seq <= msg.seq) continue;
        // An overflow after the snapshot: load again, and what followed it waits for that.
        this.seq.next(h.seq);
        this.requestSnapshot();
        this.held = held.slice(i + 1);
        break;
      }
      this.onDelta(h.delta);
      if (this.awaiting) {
        // A gap: a new snapshot was asked for; the rest waits for it.
        this.held = held.slice(i + 1);
        break;
      }
    }
    if (!this.closed) this.emit('change', this.rows);
  }

  /** The presence map the channel had before this connection joined. */
  private async loadPresence(token: string): Promise<void> {
    try {
      const res = await this.deps.fetch(`${this.deps.url}/ws/_presence/${encodeURIComponent(this.queryId)}`, {
        headers: { apikey: this.deps.anonKey, authorization: `Bearer ${token}` },
      });
      if (!res.ok) return;
      const map = (await res.json()) as PresenceMap;
      let changed = false;
      for (const [id, state] of Object.entries(map ?? {})) {
        if (this.presenceTouched.has(id)) continue;
        this.presenceMap[id] = state;
        changed = true;
      }
      if (changed) this.emit('presence', this.presence);
    } catch {
      /* presence stays what the stream says */
    }
  }

  /** Load the whole result again through the caller's `refetch` and replace the rows. */
  refetch(): Promise<void> {
    const load = this.opts.refetch;
    if (!load) return Promise.resolve();
    if (this.fetching) {
      this.fetchAgain = true;
      return this.fetching;
    }
    const run = async () => {
      do {
        this.fetchAgain = false;
        this.pending = [];
        this.refetches++;
        let rows: Row[] | null = null;
        try {
          const r = await load();
          if (Array.isArray(r)) rows = r;
          else if (r && typeof r === 'object') {
            if (r.error) throw asError(r.error);
            rows = r.data ?? [];
          } else rows = [];
        } catch (e) {
          this.emit('error', asError(e));
        }
        if (rows) {
          this.set.replace(rows);
          for (const d of this.pending) this.set.apply(d, true);
        }
        this.pending = [];
      } while (this.fetchAgain && !this.closed);
    };
    const p = run().finally(() => {
      this.fetching = null;
      if (!this.closed) this.emit('change', this.rows);
    });
    this.fetching = p;
    return p;
  }

  private send(msg: unknown): boolean {
    const ws = this.ws;
    if (!ws || ws.readyState !== OPEN || this._status !== 'subscribed') return false;
    ws.send(JSON.stringify(msg));
    return true;
  }

  /** Send to every client of the channel (this one included); false when not connected. */
  broadcast(payload: unknown): boolean {
    return this.send({ type: 'broadcast', payload });
  }

  /** Set this client's presence state; it is sent again after every reconnect. */
  track(state: Record<string, unknown>): boolean {
    this.tracked = state;
    return this.send({ type: 'presence', state });
  }

  /** Close for good. */
  close(): void {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.reconnectTimer = null;
    const ws = this.ws;
    this.ws = null;
    if (ws) ws.close(1000, 'closed');
    this.setStatus('closed');
  }
}
