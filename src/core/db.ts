/**
 * The database: one request pool (porsager/postgres), one LISTEN connection for cache
 * reloads, and `withContext`, which runs work as the request's role with its claims.
 *
 * Role and claims must be set in a statement *before* the work: PostgreSQL checks
 * privileges and RLS as the role current when a statement starts. To keep one round
 * trip, `begin`, `set_config(...)`, the work and `commit` are written to one reserved
 * connection together, without awaiting in between (pipelining; `prepare: true`).
 */
import postgres from 'postgres';
import type { Logger } from './log.ts';

export type Sql = postgres.Sql<Record<string, never>>;
export type ReservedSql = postgres.ReservedSql<Record<string, never>>;
export type PendingQuery = postgres.PendingQuery<postgres.Row[]>;

/** Who is calling, as the database sees it. */
export interface RequestContext {
  role: string;
  /** The claims as JSON text, exactly what `request.jwt.claims` holds. */
  claims: string;
  /** The same claims, parsed. */
  claimsObject: Readonly<Record<string, unknown>>;
}

/** The channel every cache listens on; the payload names the cache (`rest`, `functions`, `live` …). */
export const CACHE_CHANNEL = 'plinth_cache';

export interface DbOptions {
  url: string;
  /** Lanes of `withContext` (DB_POOL_SIZE); the service's own pool has as many connections. */
  poolSize: number;
  log: Logger;
  /** Application name shown in pg_stat_activity. */
  applicationName?: string;
}

/**
 * The lanes of `withContext`. Each lane is one connection (a `max: 1` pool, which lets the
 * driver pipeline and reconnect by itself) carrying many requests' blocks back to back;
 * blocks written in the same tick leave in one socket write, which is where the
 * throughput comes from (one reserved connection per request cost about half).
 *
 * Safety: a lane connects with `role=plinth_authenticator`, a role with no privileges. If a
 * connection dies in the middle of a block, the rest of it may reach the reconnected
 * session without its BEGIN and role: it then runs as plinth_authenticator and fails,
 * instead of running as the connecting (owner) role. After each COMMIT the role reverts to
 * plinth_authenticator too.
 */
export const AUTHENTICATOR_ROLE = 'plinth_authenticator';
/** Blocks in flight on one lane: 4 statements each stays under the driver's 100-statement pipeline. */
const LANE_DEPTH = 24;

interface Lane {
  sql: Sql;
  inflight: number;
}

class Lanes {
  private readonly lanes: Lane[];
  private readonly waiting: Array<(lane: Lane) => void> = [];

  constructor(url: string, count: number, applicationName: string) {
    this.lanes = Array.from({ length: count }, () => ({
      inflight: 0,
      sql: postgres(url, {
        max: 1,
        prepare: true,
        connect_timeout: 2,
        idle_timeout: 60,
        max_lifetime: 60 * 30,
        onnotice: () => {},
        connection: { application_name: applicationName, role: AUTHENTICATOR_ROLE },
      }) as Sql,
    }));
  }

  /** The least busy lane with room, or null when every lane is full. */
  acquire(): Lane | null {
    let best: Lane | null = null;
    for (const l of this.lanes) if (l.inflight < LANE_DEPTH && (best === null || l.inflight < best.inflight)) best = l;
    if (best) best.inflight++;
    return best;
  }

  wait(): Promise<Lane> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  release(lane: Lane): void {
    const next = this.waiting.shift();
    if (next) next(lane);
    else lane.inflight--;
  }

  async end(): Promise<void> {
    await Promise.all(this.lanes.map((l) => l.sql.end({ timeout: 5 })));
  }
}

export class Db {
  /** The service's own pool (auth, admin, webhooks, jobs): runs as the connecting role. */
  readonly sql: Sql;
  private readonly lanes: Lanes;
  private readonly log: Logger;
  private readonly cacheHandlers = new Map<string, Set<() => void | Promise<void>>>();
  private listening: Promise<unknown> | null = null;
  private listenHandle: { unlisten(): Promise<void> } | null = null;
  private ended = false;
  /** Request statements in flight, for `cancelInFlight` (the shutdown deadline). */
  private readonly inFlight = new Set<{ cancel(): unknown }>();

  constructor(opts: DbOptions) {
    this.log = opts.log;
    this.sql = postgres(opts.url, {
      max: opts.poolSize,
      prepare: true,
      connect_timeout: 2,
      idle_timeout: 60,
      max_lifetime: 60 * 30,
      onnotice: () => {},
      connection: { application_name: opts.applicationName ?? 'plinth' },
    }) as Sql;
    this.lanes = new Lanes(opts.url, opts.poolSize, `${opts.applicationName ?? 'plinth'}-requests`);
  }

  /**
   * Run one statement as `ctx.role` with `ctx.claims`, in one transaction and one round
   * trip. `work` must return the (not yet awaited) query; it is written right behind the
   * role setup and followed by COMMIT, all in the same tick, so the four statements form
   * one contiguous block on one lane. If the work fails, the COMMIT of the aborted
   * transaction rolls it back.
   */
  async withContext<R extends postgres.Row = postgres.Row>(
    ctx: RequestContext,
    work: (c: Sql) => postgres.PendingQuery<R[]>,
  ): Promise<postgres.RowList<R[]>> {
    const lane = this.lanes.acquire() ?? (await this.lanes.wait());
    try {
      const c = lane.sql;
      const w = work(c);
      this.inFlight.add(w);
      const results = await Promise.allSettled([
        c`begin`.execute(),
        c`select set_config('role', ${ctx.role}, true), set_config('request.jwt.claims', ${ctx.claims}, true)`.execute(),
        w.execute(),
        c`commit`.execute(),
      ]).finally(() => this.inFlight.delete(w));
      for (const r of results) if (r.status === 'rejected') throw r.reason;
      return (results[2] as PromiseFulfilledResult<postgres.RowList<R[]>>).value;
    } finally {
      this.lanes.release(lane);
    }
  }

  /**
   * Several statements in one transaction as `ctx.role` (batch, storage). The role setup is
   * pipelined in front of the first statement `fn` sends; COMMIT follows when `fn` resolves,
   * ROLLBACK when it throws.
   */
  async transactionWithContext<T>(ctx: RequestContext, fn: (c: ReservedSql) => Promise<T>): Promise<T> {
    const c = await this.sql.reserve();
    // Cancelling the (finished) BEGIN cancels whatever statement its connection runs then.
    const begin = c`begin`;
    this.inFlight.add(begin);
    try {
      const setup = Promise.all([
        begin.execute(),
        c`select set_config('role', ${ctx.role}, true), set_config('request.jwt.claims', ${ctx.claims}, true)`.execute(),
      ]);
      let result: T;
      try {
        [, result] = await Promise.all([setup, fn(c)]);
      } catch (err) {
        await setup.catch(() => {});
        await c`rollback`.catch(() => {});
        throw err;
      }
      await c`commit`;
      return result;
    } finally {
      this.inFlight.delete(begin);
      c.release();
    }
  }

  /**
   * The shutdown deadline: cancel every request statement in flight (a CancelRequest to
   * its connection's backend, as `query.cancel()` sends; one not yet running is cancelled
   * when it starts). Returns how many transactions were cancelled.
   */
  async cancelInFlight(): Promise<number> {
    const all = [...this.inFlight];
    this.inFlight.clear();
    await Promise.allSettled(all.map((q) => q.cancel()));
    return all.length;
  }

  /** true when a trivial query answers within `timeoutMs`. */
  async ping(timeoutMs = 2000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      const query = this.sql`select 1 as ok`.then(
        () => true,
        () => false,
      );
      return await Promise.race([query, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Register a reload for the cache `name`; starts the one LISTEN connection on first use. */
  onCacheReload(name: string, handler: () => void | Promise<void>): void {
    let set = this.cacheHandlers.get(name);
    if (!set) this.cacheHandlers.set(name, (set = new Set()));
    set.add(handler);
    this.listening ??= this.sql
      .listen(CACHE_CHANNEL, (payload) => void this.dispatchCacheReload(payload))
      .then((h) => {
        this.listenHandle = h;
        return h;
      })
      .catch((err: unknown) => {
        // The driver re-listens by itself after a reconnect; a failure here means the database
        // was down at start. Retry later so caches still reload once it is back.
        this.log.warn({ err }, 'cache listener could not start; retrying');
        this.listening = null;
        if (!this.ended) setTimeout(() => this.restartListener(), 1000).unref();
      });
  }

  private restartListener(): void {
    const first = this.cacheHandlers.keys().next();
    if (first.done || this.listening) return;
    const handlers = this.cacheHandlers.get(first.value);
    const h = handlers?.values().next().value;
    if (h) {
      handlers!.delete(h);
      this.onCacheReload(first.value, h);
    }
  }

  private async dispatchCacheReload(payload: string): Promise<void> {
    const names = payload === '*' ? [...this.cacheHandlers.keys()] : payload.split(',');
    for (const name of names) {
      for (const h of this.cacheHandlers.get(name.trim()) ?? []) {
        try {
          await h();
        } catch (err) {
          this.log.error({ err, cache: name }, 'cache reload failed');
        }
      }
    }
  }

  /** Tell every instance (this one included) to reload the named cache. */
  async notifyCacheReload(name: string): Promise<void> {
    await this.sql`select pg_notify(${CACHE_CHANNEL}, ${name})`;
  }

  async end(): Promise<void> {
    this.ended = true;
    await this.listenHandle?.unlisten().catch(() => {});
    await Promise.all([this.sql.end({ timeout: 5 }), this.lanes.end()]);
  }
}
