/**
 * The sockets of this instance, by channel (= query_id), with connection counts, a
 * bounded send buffer per client and pings. No state machine lives here: what a client
 * receives comes from PostgreSQL (NOTIFY), this only fans it out.
 */
import { randomUUID } from 'node:crypto';
import type { WebSocket } from 'ws';

/** A client whose unsent data passes this is too slow: it is closed, the others go on. */
export const MAX_BUFFERED_BYTES = 4 << 20;

/** The socket under a `ws` WebSocket: cork/uncork make the frames of one tick one write. */
function socketOf(ws: WebSocket): { cork(): void; uncork(): void } | undefined {
  return (ws as unknown as { _socket?: { cork(): void; uncork(): void } })._socket;
}

export interface Client {
  id: string;
  channel: string;
  /**
   * Where its subscription's messages come from: the query_id, or for an `as: subscriber`
   * subscription its group's route (routeOfGroup).
   */
  route: string;
  ws: WebSocket;
  alive: boolean;
  /** The last presence state sent (JSON text), null before the first. */
  state: string | null;
  /** The client's database work (broadcast, presence) in order. */
  queue: Promise<void>;
  /** Broadcasts waiting at the tail of `queue`: later ones join them (one round trip). */
  batch: string[] | null;
}

/** The route of a group of an `as: subscriber` subscription (a query_id has no control character). */
export function routeOfGroup(gid: string): string {
  return `\u0001${gid}`;
}

export class Hub {
  /** Clients by channel (= query_id): broadcast and presence. */
  readonly channels = new Map<string, Set<Client>>();
  /** Clients by route: a subscription's messages (its group's, for `as: subscriber`). */
  readonly routes = new Map<string, Set<Client>>();
  /** The last seq each route's clients were sent (delta, invalidated, overflow) or started from. */
  readonly seqs = new Map<string, number>();
  /** Clients whose socket is corked until the end of this tick. */
  private corked = new Set<Client>();
  /** When each subscription message of this tick reached the instance (performance.now()). */
  private arrivals: number[] = [];
  /** Seconds from a subscription message's arrival to its write to the sockets (the metric). */
  onDelivered: ((seconds: number) => void) | null = null;
  private readonly perIp = new Map<string, number>();
  total = 0;
  private readonly maxTotal: number;
  private readonly maxPerIp: number;

  constructor(maxTotal: number, maxPerIp: number) {
    this.maxTotal = maxTotal;
    this.maxPerIp = maxPerIp;
  }

  /** 'total' or 'ip' when a new connection from `ip` would pass a cap. */
  full(ip: string): 'total' | 'ip' | null {
    if (this.total >= this.maxTotal) return 'total';
    if ((this.perIp.get(ip) ?? 0) >= this.maxPerIp) return 'ip';
    return null;
  }

  /** Count a connection; the returned function uncounts it (once). */
  reserve(ip: string): () => void {
    this.total++;
    this.perIp.set(ip, (this.perIp.get(ip) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total--;
      const n = (this.perIp.get(ip) ?? 1) - 1;
      if (n <= 0) this.perIp.delete(ip);
      else this.perIp.set(ip, n);
    };
  }

  /** A new client of `channel` on `route`, whose subscription was at `seq` when it was let in. */
  add(channel: string, ws: WebSocket, route = channel, seq = 0): Client {
    const client: Client = { id: randomUUID(), channel, route, ws, alive: true, state: null, queue: Promise.resolve(), batch: null };
    let set = this.channels.get(channel);
    if (!set) this.channels.set(channel, (set = new Set()));
    set.add(client);
    let r = this.routes.get(route);
    if (!r) this.routes.set(route, (r = new Set()));
    r.add(client);
    if (!this.seqs.has(route) || this.seqs.get(route)! < seq) this.seqs.set(route, seq);
    return client;
  }

  remove(client: Client): void {
    const set = this.channels.get(client.channel);
    if (set) {
      set.delete(client);
      if (set.size === 0) this.channels.delete(client.channel);
    }
    const r = this.routes.get(client.route);
    if (r) {
      r.delete(client);
      if (r.size === 0) {
        this.routes.delete(client.route);
        this.seqs.delete(client.route);
      }
    }
  }

  /** A subscription message (with its seq) to every client of a route; `arrivedAt`: when its NOTIFY reached this instance. */
  deliver(route: string, text: string, seq: number, arrivedAt = performance.now()): void {
    const set = this.routes.get(route);
    if (!set || set.size === 0) return;
    if (Number.isFinite(seq) && seq > (this.seqs.get(route) ?? 0)) this.seqs.set(route, seq);
    if (this.onDelivered !== null) this.arrivals.push(arrivedAt);
    this.fanoutTo(set, text);
  }

  /** Send to one client; a client whose buffer is full is dropped. */
  send(client: Client, data: Buffer | string): void {
    const ws = client.ws;
    if (ws.readyState !== ws.OPEN) return;
    if (ws.bufferedAmount > MAX_BUFFERED_BYTES) {
      ws.terminate();
      return;
    }
    ws.send(data, { binary: false });
  }

  /**
   * Send the same text to every client of a channel (encoded once). Notifications come in
   * bursts (one read of the LISTEN connection carries many): each client's socket stays
   * corked until the end of the tick, so a burst costs one write per client, not one per
   * message.
   */
  fanout(channel: string, text: string): void {
    const set = this.channels.get(channel);
    if (set) this.fanoutTo(set, text);
  }

  private fanoutTo(set: Set<Client>, text: string): void {
    if (set.size === 0) return;
    const data = Buffer.from(text);
    if (this.corked.size === 0) setImmediate(() => this.uncorkAll());
    for (const c of set) {
      if (!this.corked.has(c)) {
        socketOf(c.ws)?.cork();
        this.corked.add(c);
      }
      this.send(c, data);
    }
  }

  private uncorkAll(): void {
    const clients = this.corked;
    this.corked = new Set();
    for (const c of clients) socketOf(c.ws)?.uncork();
    if (this.arrivals.length > 0) {
      const now = performance.now();
      for (const at of this.arrivals) this.onDelivered?.((now - at) / 1000);
      this.arrivals.length = 0;
    }
  }

  all(): Client[] {
    const out: Client[] = [];
    for (const set of this.channels.values()) for (const c of set) out.push(c);
    return out;
  }

  /** One ping round of the `/ws` clients (pingRound). */
  ping(): void {
    pingRound(this.all());
  }
}

/**
 * One ping round over sockets, `/ws` and `/realtime/v1` alike: a socket that did not answer
 * the previous ping (its pong sets `alive`) is terminated; the others are pinged.
 */
export function pingRound(conns: Iterable<{ alive: boolean; ws: Pick<WebSocket, 'ping' | 'terminate'> }>): void {
  for (const c of conns) {
    if (!c.alive) {
      c.ws.terminate();
      continue;
    }
    c.alive = false;
    try {
      c.ws.ping();
    } catch {
      c.ws.terminate();
    }
  }
}
