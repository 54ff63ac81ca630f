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
  poolSize: number;
  log: Logger;
  /** Application name shown in pg_stat_activity. */
  applicationName?: string;
}

export class Db {
  readonly sql: Sql;
  private readonly log: Logger;
  private readonly cacheHandlers = new Map<string, Set<() => void | Promise<void>>>();
  private listening: Promise<unknown> | null = null;
  private listenHandle: { unlisten(): Promise<void> } | null = null;
  private ended = false;

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
  }

  /**
   * Run one statement as `ctx.role` with `ctx.claims`, in one transaction and one round
   * trip. `work` must return the (not yet awaited) query; it is sent right behind the
   * role setup and followed by COMMIT. If the work fails, the COMMIT of the aborted
   * transaction rolls it back.
   */
  async withContext<R extends postgres.Row = postgres.Row>(
    ctx: RequestContext,
    work: (c: ReservedSql) => postgres.PendingQuery<R[]>,
  ): Promise<postgres.RowList<R[]>> {
    const c = await this.sql.reserve();
    try {
      const results = await Promise.allSettled([
        c`begin`.execute(),
        c`select set_config('role', ${ctx.role}, true), set_config('request.jwt.claims', ${ctx.claims}, true)`.execute(),
        work(c).execute(),
        c`commit`.execute(),
      ]);
      for (const r of results) if (r.status === 'rejected') throw r.reason;
      return (results[2] as PromiseFulfilledResult<postgres.RowList<R[]>>).value;
    } finally {
      c.release();
    }
  }

  /**
   * Several statements in one transaction as `ctx.role` (batch, storage). The role setup is
   * pipelined in front of the first statement `fn` sends; COMMIT follows when `fn` resolves,
   * ROLLBACK when it throws.
   */
  async transactionWithContext<T>(ctx: RequestContext, fn: (c: ReservedSql) => Promise<T>): Promise<T> {
    const c = await this.sql.reserve();
    try {
      const setup = Promise.all([
        c`begin`.execute(),
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
      c.release();
    }
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
    await this.sql.end({ timeout: 5 });
  }
}
