/**
 * The request lanes of one API role: up to `count` connections as the role's login role
 * (lane/client.ts), the choice of a lane for each request, reconnection with backoff, and the
 * role's transaction pool (several statements in one transaction: batch, uploads), a
 * `postgres` pool as the same login role.
 *
 * Lanes open on demand: a role's first lane at its first request, each next one as soon as
 * the one before it takes a request (in the background, and only when the budget has a
 * connection free at once: a request sent to a lane still connecting would wait for it), a
 * lost one at the next request that picks it. Every connection of the lanes and of the
 * transaction pool is taken from the instance's one `ConnectionBudget` (lane/budget.ts); a
 * lane idle for `idleMs` closes, and so does an idle lane the budget asks back for another
 * pool.
 */
import postgres from 'postgres';
import { budgetedSocket, type ConnectionBudget, type Evictor } from './budget.ts';
import { LaneConnection, LaneError, tlsModeOf, type TlsMode } from './client.ts';
import type { LaneQuery, Row, Rows } from './sql.ts';

export type Sql = postgres.Sql<Record<string, never>>;

/**
 * Seconds before the next connection attempt after `attempt` failed ones: 0.05, 0.1, 0.2 …
 * up to 2 s. The driver's default grows to 20 s, so after an outage of a few seconds the
 * service would go on failing requests for up to 20 s once the database is back.
 */
export const reconnectBackoff = (attempt: number): number => Math.min(0.05 * 2 ** attempt, 2);

/** Seconds a connection attempt may take (TLS negotiation included). */
export const CONNECT_TIMEOUT_S = 2;

/** Seconds a connection lives: then it is replaced (once idle), as the owner pool's are. */
const MAX_LIFETIME_S = 60 * 30;

/** Requests in flight on one lane at most. */
const LANE_DEPTH = 16;

/**
 * Requests a lane takes before the next lane is used: requests that share a lane leave in
 * one socket write and reach PostgreSQL in one read (fewer system calls and wake-ups on both
 * sides), at the price of waiting behind each other on it. Measured with 16 requests in
 * flight (npm run bench): 1 (the least busy lane) 0.67–0.79 of the bare server for a get by
 * key; 4: 1.03–1.07; 8: 1.16–1.19 but inserts fell to 0.77–0.89 (fewer backends committing
 * at once, less group commit).
 */
const LANE_SHARE = 4;

/** A lane with requests in flight that answered none (nor took its first) for this long is held by a slow statement: no request joins it (decision 0320). */
const LANE_STALL_MS = 2;

export interface Lane {
  conn: LaneConnection | null;
  opening: Promise<LaneConnection> | null;
  inflight: number;
  /** When it last answered a request (performance.now()). */
  answered: number;
  /** When its in-flight requests began, from nothing in flight (performance.now()). */
  since: number;
  /** Failed connection attempts in a row, and when the last one failed. */
  failures: number;
  failedAt: number;
}

/** Whether a lane may take a request behind those it has in flight: none, or one answered (or began) within LANE_STALL_MS. */
function moving(l: Lane, now: number): boolean {
  return l.inflight === 0 || now - Math.max(l.answered, l.since) < LANE_STALL_MS;
}

interface LaneWaiter {
  resolve(lane: Lane): void;
  timer: NodeJS.Timeout;
}

export interface RoleLanesOptions {
  /** The login role's URL (user and password set). */
  url: string;
  count: number;
  applicationName: string;
  apiRole: string;
  budget: ConnectionBudget;
  /** A lane (and a transaction pool connection) idle this long is closed. */
  idleMs: number;
  /** Behind a pooler in transaction mode: unnamed statements, no `options` startup parameter. */
  pooler: boolean;
}

export class RoleLanes {
  private readonly lanes: Lane[];
  private readonly waiting: LaneWaiter[] = [];
  /** While requests wait: looks for a lane for them every few milliseconds. */
  private polling: NodeJS.Timeout | null = null;
  private txnPool: Sql | null = null;
  private readonly o: RoleLanesOptions;
  private readonly tls: TlsMode;
  private ended = false;
  private readonly idleTimer: NodeJS.Timeout;
  private readonly unevict: () => void;
  /** The budget's way of asking these lanes for an idle connection. */
  private readonly evictor: Evictor = (spareOnly) => this.closeIdle(Infinity, 1, spareOnly ? 1 : 0) > 0;

  constructor(o: RoleLanesOptions) {
    this.o = o;
    this.tls = tlsModeOf(o.url);
    this.lanes = Array.from({ length: o.count }, () => ({ conn: null, opening: null, inflight: 0, answered: 0, since: 0, failures: 0, failedAt: 0 }));
    this.open(this.lanes[0]).catch(() => {});
    this.idleTimer = setInterval(() => this.closeIdle(performance.now() - o.idleMs), Math.max(50, o.idleMs / 4));
    this.idleTimer.unref();
    this.unevict = o.budget.onEvict(this.evictor);
  }

  /**
   * Close (from the last lane back) up to `most` lanes with nothing in flight that last
   * answered before `before`, keeping at least `keep` open; how many closed.
   */
  private closeIdle(before: number, most = Infinity, keep = 0): number {
    let n = 0;
    let open = this.lanes.filter((l) => l.conn !== null).length;
    for (let i = this.lanes.length - 1; i >= 0 && n < most && open > keep; i--) {
      const l = this.lanes[i];
      const c = l.conn;
      if (c === null || l.inflight > 0 || c.inflight > 0 || l.opening !== null) continue;
      if (Math.max(l.answered, c.opened) >= before) continue;
      l.conn = null;
      void c.end();
      n++;
      open--;
    }
    return n;
  }

  /**
   * The lane's connection, opened (or reopened, after the backoff) when it has none, with a
   * connection of the budget: waited for, or (`taken`) already taken by the caller.
   */
  open(lane: Lane, taken = false): Promise<LaneConnection> {
    if (lane.opening) {
      if (taken) this.o.budget.give();
      return lane.opening;
    }
    lane.opening = (async () => {
      try {
        if (lane.failures > 0) {
          const wait = reconnectBackoff(lane.failures - 1) * 1000 - (performance.now() - lane.failedAt);
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        }
        if (this.ended) {
          if (taken) this.o.budget.give();
          throw new LaneError('the request lanes have ended', 'CONNECTION_ENDED');
        }
        if (!taken) await this.o.budget.take(this.evictor);
        let conn: LaneConnection;
        try {
          conn = await LaneConnection.open({
            url: this.o.url,
            role: this.o.apiRole,
            applicationName: this.o.applicationName,
            tls: this.tls,
            connectTimeoutMs: CONNECT_TIMEOUT_S * 1000,
            pooler: this.o.pooler,
          });
        } catch (err) {
          this.o.budget.give();
          this.o.budget.refusedAt = performance.now();
          lane.failures++;
          lane.failedAt = performance.now();
          throw err;
        }
        lane.failures = 0;
        const lost = () => {
          if (lane.conn === conn) lane.conn = null;
        };
        conn.client.once('end', () => {
          this.o.budget.give();
          lost();
        });
        conn.client.on('error', lost);
        if (this.ended) void conn.end();
        else lane.conn = conn;
        return conn;
      } finally {
        lane.opening = null;
      }
    })();
    return lane.opening;
  }

  /**
   * The first lane (in order) with fewer than LANE_SHARE requests in flight that is moving
   * (nothing in flight, or an answer or its first request within LANE_STALL_MS), else the
   * least busy moving lane with room, else a lane without a connection (it opens), else null:
   * the caller waits (`wait`); for a request that has waited (`waited`), a lane without a
   * connection only with one free in the budget at once (its wait is already counting).
   * Requests gather on few lanes and leave in one write; a lane
   * held by a slow statement takes no request behind it, whatever the other lanes' state: a
   * request queued there would wait for that statement, however long it runs, with no
   * DB_POOL_TIMEOUT_MS to bound it.
   */
  acquire(waited = false): Lane | null {
    const now = performance.now();
    let best = -1;
    for (let i = 0; i < this.lanes.length; i++) {
      const l = this.lanes[i];
      if (l.conn === null && l.opening === null) continue;
      if (!moving(l, now) || l.inflight >= LANE_DEPTH) continue;
      if (l.inflight < LANE_SHARE) {
        best = i;
        break;
      }
      if (best < 0 || l.inflight < this.lanes[best].inflight) best = i;
    }
    if (best < 0) {
      best = this.lanes.findIndex((l) => l.conn === null && l.opening === null);
      if (best < 0) return null;
      if (waited) {
        if (this.ended || !this.o.budget.tryTake()) return null;
        this.open(this.lanes[best], true).catch(() => {});
      }
    }
    const lane = this.take(this.lanes[best], now);
    // The next lane without a connection opens now, so that it is ready when requests pile
    // up: only with a connection free in the budget at once (else the lanes open share it).
    const next = this.lanes.find((l, i) => i > best && l.conn === null && l.opening === null);
    if (next && next.failures === 0 && !this.ended && this.o.budget.tryTake()) this.open(next, true).catch(() => {});
    return lane;
  }

  private take(lane: Lane, now: number): Lane {
    if (lane.inflight === 0) lane.since = now;
    lane.inflight++;
    return lane;
  }

  /**
   * A lane once one may take the request (one answers, or closes and may open again), or
   * `DB_BUSY` after the budget's DB_POOL_TIMEOUT_MS: the wait for a connection, pipelined or
   * not, is bounded by it.
   */
  wait(): Promise<Lane> {
    return new Promise<Lane>((resolve, reject) => {
      const w: LaneWaiter = {
        resolve,
        timer: setTimeout(() => {
          const i = this.waiting.indexOf(w);
          if (i >= 0) this.waiting.splice(i, 1);
          if (this.waiting.length === 0) this.stopPolling();
          this.o.budget.refusedAt = performance.now();
          reject(new LaneError('no database connection became free in time', 'DB_BUSY'));
        }, this.o.budget.timeoutMs),
      };
      this.waiting.push(w);
      // A lane may close meanwhile (lost, idle, asked back by the budget) and be opened again
      // for a waiter: looked for every few milliseconds while anyone waits.
      this.polling ??= setInterval(() => this.serveWaiting(), 5);
    });
  }

  /** Hand lanes that may take a request to the requests waiting, in order. */
  private serveWaiting(): void {
    while (this.waiting.length > 0) {
      const lane = this.acquire(true);
      if (lane === null) return;
      const w = this.waiting.shift()!;
      clearTimeout(w.timer);
      w.resolve(lane);
    }
    this.stopPolling();
  }

  private stopPolling(): void {
    if (this.polling !== null) clearInterval(this.polling);
    this.polling = null;
  }

  /**
   * For the metrics: lane connections open, those of them with requests in flight (a lane
   * whose connection is still being opened has none to count), and requests waiting for a lane.
   */
  stats(): { open: number; inUse: number; waiting: number } {
    let open = 0;
    let inUse = 0;
    for (const l of this.lanes) {
      if (l.conn === null || l.conn.closed) continue;
      open++;
      if (l.inflight > 0) inUse++;
    }
    return { open, inUse, waiting: this.waiting.length };
  }

  release(lane: Lane): void {
    lane.answered = performance.now();
    lane.inflight--;
    if (this.waiting.length > 0) this.serveWaiting();
  }

  /** Run one request on `lane`: its connection (opened if need be), claims and work in one unit. */
  run<R extends Row>(lane: Lane, claims: string, timeout: string | null, work: LaneQuery, requestId: string | null = null): Promise<Rows<R>> {
    let conn = lane.conn;
    if (conn !== null && conn.inflight === 0 && performance.now() - conn.opened > MAX_LIFETIME_S * 1000) {
      lane.conn = null;
      void conn.end();
      conn = null;
    }
    if (conn !== null && !conn.closed) return conn.run<R>(claims, timeout, work, requestId);
    return this.open(lane).then((c) => c.run<R>(claims, timeout, work, requestId));
  }

  /** The role's transaction pool: `postgres`, as the same login role, for several statements in one transaction. */
  get txn(): Sql {
    return (this.txnPool ??= budgetedPool(this.o.url, this.o.budget, this.o.idleMs, {
      max: this.o.count,
      prepare: !this.o.pooler,
      connect_timeout: CONNECT_TIMEOUT_S,
      max_lifetime: MAX_LIFETIME_S,
      onnotice: () => {},
      backoff: reconnectBackoff,
      // The session role is the API role (set on the login role as well; this makes it so
      // even where a DBA left that out). A pooler forwards no such startup parameter.
      connection: this.o.pooler ? { application_name: this.o.applicationName } : { application_name: this.o.applicationName, role: this.o.apiRole },
    }));
  }

  /** Close every lane: requests in flight may finish for `timeout` seconds, then the sockets are cut. */
  async end(timeout: number): Promise<void> {
    this.ended = true;
    clearInterval(this.idleTimer);
    this.stopPolling();
    this.unevict();
    const conns = this.lanes.map((l) => l.conn).filter((c): c is LaneConnection => c !== null);
    let timer: NodeJS.Timeout | undefined;
    const cut = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        for (const c of conns) c.client.connection.stream.destroy();
        resolve();
      }, timeout * 1000);
    });
    await Promise.all([Promise.race([Promise.all(conns.map((c) => c.end())), cut]), this.txnPool?.end({ timeout })]);
    clearTimeout(timer);
  }
}

/**
 * A `postgres` pool whose connections are taken from `budget` and close after `idleMs` idle;
 * when the budget is spent and another pool waits, its oldest idle connection closes.
 */
export function budgetedPool(url: string, budget: ConnectionBudget, idleMs: number, options: postgres.Options<Record<string, never>>): Sql {
  // TLS, when the URL asks for it, is negotiated by the budget's socket (the driver gets the
  // TLS socket and the URL without its sslmode), so the pool's connections count over TLS too.
  const u = new URL(url);
  for (const k of ['sslmode', 'ssl', 'sslrootcert']) u.searchParams.delete(k);
  let evictor: Evictor | undefined;
  const sql = postgres(u.toString(), {
    ...options,
    ssl: false,
    idle_timeout: idleMs / 1000,
    socket: budgetedSocket(budget, CONNECT_TIMEOUT_S * 1000, tlsModeOf(url), () => evictor),
  } as postgres.Options<Record<string, never>>) as unknown as Sql & { evictIdle(): boolean };
  evictor = () => sql.evictIdle();
  const unevict = budget.onEvict(evictor);
  const end = sql.end.bind(sql);
  sql.end = ((o?: { timeout?: number }) => {
    unevict();
    return end(o);
  });
  return sql;
}
