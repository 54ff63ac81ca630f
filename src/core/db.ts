/**
 * The database: the owner pool (migrations' role: the service's own auth/admin/webhook/
 * storage functions), `/api/sql`'s connection (plinth_sql), one LISTEN connection for cache reloads, and the request
 * lanes, where `withContext` and `transactionWithContext` run work as the caller.
 *
 * Request work never runs on an owner connection. Each API role has its own LOGIN role
 * (LOGIN_ROLES: plinth_anon, plinth_authenticated, plinth_service, plinth_guest), NOINHERIT,
 * owning nothing, a member of that one API role only, whose session role is the API role.
 * PostgreSQL checks SET ROLE and set_config('role', …) against the session user, so SQL
 * running as anon can become anon or plinth_anon (no privileges), never the owner or another
 * API role. A request goes to a lane of its role; only the claims (and the role's statement
 * timeout) are set per request, in a statement before the work, local to its transaction.
 *
 * One Sync per request: on a lane the claims statement and the work go out as one unit of
 * the extended protocol, one implicit transaction (lane/client.ts).
 */
import { hkdfSync, randomBytes, randomUUID } from 'node:crypto';
import postgres from 'postgres';
import type { Logger } from './log.ts';
import { hooks as spanHooks } from './spans.ts';
import { CLAIMS_SQL } from './lane/client.ts';
import { ConnectionBudget } from './lane/budget.ts';
import { LaneError } from './lane/client.ts';
import { budgetedPool, CONNECT_TIMEOUT_S, RoleLanes, reconnectBackoff, type Sql } from './lane/lanes.ts';
import { ConnectionListener, type Listener } from './listener.ts';
import { nextReplica, Replica, replicaFailed } from './replicas.ts';
import { laneSql, type LaneQuery, type LaneSql, type Row, type Rows } from './lane/sql.ts';

export type { LaneQuery, LaneSql, Rows, Sql };
export type ReservedSql = postgres.ReservedSql<Record<string, never>>;
export type PendingQuery = postgres.PendingQuery<postgres.Row[]>;

/** Who is calling, as the database sees it. */
export interface RequestContext {
  role: string;
  /** The claims as JSON text, exactly what `request.jwt.claims` holds. */
  claims: string;
  /** The same claims, parsed. */
  claimsObject: Readonly<Record<string, unknown>>;
  /** The request's id (X-Request-Id): SQL reads it as `current_setting('request.id', true)`. */
  requestId?: string;
}

/** The channel every cache listens on; the payload names the cache (`rest`, `functions`, `live`, `roles` …). */
export const CACHE_CHANNEL = 'plinth_cache';

/** The login role of each API role's lanes; the guest role (ANONYMOUS_ROLE) logs in as `plinth_guest`. */
export const LOGIN_ROLES: Readonly<Record<string, string>> = Object.freeze({
  anon: 'plinth_anon',
  authenticated: 'plinth_authenticated',
  service_role: 'plinth_service',
});
export const GUEST_LOGIN_ROLE = 'plinth_guest';
/** The login role of POST /api/sql: not a superuser, a member of service_role only (sql/fixtures/core/sql_role.sql). */
export const SQL_LOGIN_ROLE = 'plinth_sql';

/** The login role for an API role, or null when it is not one of the four. */
export function loginRoleFor(apiRole: string, anonymousRole: string): string | null {
  return LOGIN_ROLES[apiRole] ?? (apiRole === anonymousRole ? GUEST_LOGIN_ROLE : null);
}

/**
 * The password of a login role when configuration names none (DB_REQUEST_PASSWORD unset):
 * HKDF of JWT_SECRET, like the email seal key, so the operator keeps one secret.
 */
export function deriveLoginPassword(secret: string, loginRole: string): string {
  return Buffer.from(hkdfSync('sha256', secret, 'plinth', `plinth request login role ${loginRole} v1`, 32)).toString('base64url');
}

/** What `Db.connectionHealth` reports. */
export interface ConnectionHealth {
  ok: boolean;
  /** The listener (LISTEN, periodic work) is connected. */
  listener: boolean;
  /** A request waited for a connection in vain, or the database refused one, lately. */
  refusedRecently: boolean;
  /** Request connections held now, the budget (DB_POOL_SIZE), requests waiting for one. */
  inUse: number;
  limit: number;
  waiting: number;
}

export interface DbOptions {
  url: string;
  /**
   * DB_POOL_SIZE: every request connection of this instance (the owner pool, each API
   * role's lanes and transaction pool) together; the listener is one more.
   */
  poolSize: number;
  /** DB_POOL_IDLE_MS: a request connection idle this long closes (default 10 s). */
  idleMs?: number;
  /** DB_POOL_TIMEOUT_MS: how long a request waits for a connection before `DB_BUSY` (default 5 s). */
  timeoutMs?: number;
  log: Logger;
  /** Application name shown in pg_stat_activity. */
  applicationName?: string;
  /** ANONYMOUS_ROLE: its lanes log in as plinth_guest (default `anonymous`). */
  anonymousRole?: string;
  /**
   * The login roles' password: a fixed one (DB_REQUEST_PASSWORD), or derived from this
   * secret (JWT_SECRET). Neither: no password (trust or peer authentication, as in tests).
   */
  requestPassword?: string | null;
  secret?: string;
  /**
   * Behind a pooler in transaction mode (PgBouncer): the lanes send unnamed statements only
   * and no startup parameter a pooler refuses (DB_POOLER=transaction); the owner pool too sends unnamed statements.
   */
  pooler?: boolean;
  /** PostgreSQL itself, for the listener (LISTEN needs a session) when `url` is a pooler (default: `url`). */
  directUrl?: string;
  /** The listener to use (one process of several: the primary's, over IPC); default: a connection of this instance's own. */
  listener?: Listener;
  /** DATABASE_READ_URL: streaming replicas for reads (`withContext(…, { read: true })`), round-robin. */
  readUrls?: readonly string[];
  /** REPLICA_MAX_LAG_MS: a replica further behind is skipped (default 1 s). */
  replicaMaxLagMs?: number;
}

/** How a statement may be served. */
export interface ContextOptions {
  /** A read that a replica may serve (when one is configured, reachable and close enough behind). */
  read?: boolean;
}

export class Db {
  /** The owner pool (auth, admin, webhooks, storage, jobs): runs as the connecting role. */
  readonly sql: Sql;
  /**
   * The webhook outbox drain's and delivery task's statements, as the connecting role: at
   * most two connections, taken from the same budget. On the owner pool, up to 64 delivery
   * jobs at once made it grow to the whole budget, the request lanes lost their connections
   * to it, and the two took them back from each other about a hundred times a second.
   */
  readonly background: Sql;
  private readonly roles = new Map<string, RoleLanes>();
  private sqlConsolePool: Sql | null = null;
  /** DATABASE_READ_URL's replicas; their connections are taken from the same budget. */
  readonly replicas: readonly Replica[];
  private readonly replicaTurn = { n: 0 };
  /** Every request connection of this instance is taken from it. */
  readonly budget: ConnectionBudget;
  /** LISTEN and periodic work: one connection outside the budget (under WORKERS > 1, the primary's). */
  readonly listener: Listener;
  private readonly opts: DbOptions;
  private readonly log: Logger;
  private readonly anonymousRole: string;
  /** This instance in the registry of instances (core/instances.ts) and in live presence. */
  readonly instanceId = randomUUID();
  /** Tags this instance's request connections in pg_stat_activity (for cancelAll). */
  readonly requestApplicationName: string;
  private readonly cacheHandlers = new Map<string, Set<() => void | Promise<void>>>();
  private listening: Promise<unknown> | null = null;
  private listenHandle: { unlisten(): Promise<void> } | null = null;
  private ended = false;
  /** statement_timeout per API role, from `alter role … set statement_timeout` (null: none). */
  private timeouts: Map<string, string | null> | null = null;
  private timeoutsLoading: Promise<Map<string, string | null>> | null = null;

  constructor(opts: DbOptions) {
    this.opts = opts;
    this.log = opts.log;
    this.anonymousRole = opts.anonymousRole ?? 'anonymous';
    this.budget = new ConnectionBudget(opts.poolSize, opts.timeoutMs ?? 5000);
    // The owner's pools: the same options, `max` apart.
    const ownerPool = (max: number) =>
      budgetedPool(opts.url, this.budget, opts.idleMs ?? 10_000, {
        max,
        prepare: !opts.pooler,
        connect_timeout: CONNECT_TIMEOUT_S,
        max_lifetime: 60 * 30,
        onnotice: () => {},
        backoff: reconnectBackoff,
        connection: { application_name: opts.applicationName ?? 'plinth' },
      });
    this.sql = ownerPool(opts.poolSize);
    this.background = ownerPool(Math.min(2, opts.poolSize));
    this.listener =
      opts.listener ??
      new ConnectionListener({
        url: opts.directUrl ?? opts.url,
        applicationName: `${opts.applicationName ?? 'plinth'}-listener`,
        log: opts.log,
        connectTimeoutMs: CONNECT_TIMEOUT_S * 1000,
      });
    this.requestApplicationName = `${opts.applicationName ?? 'plinth'}-requests-${randomBytes(4).toString('hex')}`;
    this.replicas = (opts.readUrls ?? []).map(
      (url) =>
        new Replica({
          url,
          budget: this.budget,
          idleMs: opts.idleMs ?? 10_000,
          maxLagMs: opts.replicaMaxLagMs ?? 1000,
          applicationName: this.requestApplicationName,
          primaryLsn: async () => (await this.listener.query<{ lsn: string }>('select pg_catalog.pg_current_wal_lsn()::text as lsn'))[0].lsn,
        }),
    );
    this.onCacheReload('roles', () => this.reloadTimeouts());
  }

  /** The lanes of an API role (created on first use), on the primary or on a replica. */
  private lanesFor(apiRole: string, replica: Replica | null = null): RoleLanes {
    const roles = replica?.roles ?? this.roles;
    let r = roles.get(apiRole);
    if (r) return r;
    const login = loginRoleFor(apiRole, this.anonymousRole);
    if (login === null) throw new Error(`no request lane for the role "${apiRole}"`);
    r = new RoleLanes({
      url: this.loginUrl(login, replica?.url),
      count: this.opts.poolSize,
      applicationName: this.requestApplicationName,
      apiRole,
      budget: this.budget,
      idleMs: this.opts.idleMs ?? 10_000,
      pooler: this.opts.pooler ?? false,
    });
    roles.set(apiRole, r);
    return r;
  }

  /** The URL of a login role (lanes, /api/sql): its name, and its password when plinth manages one. */
  private loginUrl(login: string, base: string = this.opts.url): string {
    const u = new URL(base);
    u.username = login;
    const password =
      this.opts.requestPassword ?? (this.opts.secret !== undefined ? deriveLoginPassword(this.opts.secret, login) : null);
    u.password = password === null ? '' : encodeURIComponent(password);
    return u.toString();
  }

  /**
   * POST /api/sql's pool (created on first use): one connection that LOGS IN as plinth_sql,
   * never the owner, so no RESET ROLE or SET ROLE in the text can reach the owner. Taken from
   * the same budget, tagged like the request connections (a shutdown cancels its statement).
   */
  sqlConsole(): Sql {
    this.sqlConsolePool ??= budgetedPool(this.loginUrl(SQL_LOGIN_ROLE), this.budget, this.opts.idleMs ?? 10_000, {
      max: 1,
      prepare: false,
      connect_timeout: CONNECT_TIMEOUT_S,
      max_lifetime: 60 * 30,
      onnotice: () => {},
      backoff: reconnectBackoff,
      connection: { application_name: this.requestApplicationName },
    });
    return this.sqlConsolePool;
  }

  /** The statement timeout of an API role, loaded once (and again on a `roles` cache reload). */
  private timeoutFor(apiRole: string): string | null | Promise<string | null> {
    if (this.timeouts) return this.timeouts.get(apiRole) ?? null;
    return this.loadTimeouts().then(
      (m) => m.get(apiRole) ?? null,
      () => null,
    );
  }

  private loadTimeouts(): Promise<Map<string, string | null>> {
    this.timeoutsLoading ??= (async () => {
      try {
        const roles = [...Object.keys(LOGIN_ROLES), this.anonymousRole];
        // A database-specific setting wins over a global one, as at login.
        const rows = await this.sql<{ rolname: string; timeout: string | null }[]>`
          select r.rolname,
                 (select substr(c, length('statement_timeout=') + 1)
                    from pg_catalog.pg_db_role_setting s, pg_catalog.unnest(s.setconfig) c
                   where s.setrole = r.oid and c like 'statement\_timeout=%'
                     and s.setdatabase in (0, (select oid from pg_catalog.pg_database where datname = pg_catalog.current_database()))
                   order by s.setdatabase desc limit 1) as timeout
            from pg_catalog.pg_roles r
           where r.rolname = any(${roles})`;
        const m = new Map<string, string | null>(rows.map((r) => [r.rolname, r.timeout]));
        this.timeouts = m;
        return m;
      } finally {
        this.timeoutsLoading = null;
      }
    })();
    return this.timeoutsLoading;
  }

  private async reloadTimeouts(): Promise<void> {
    await this.loadTimeouts();
  }

  /**
   * Run one statement as `ctx.role` with `ctx.claims`, in one transaction and one round
   * trip. `work` returns the statement, written with the `c` it is given (`c\`…\`` or
   * `c.unsafe(text, params)`); the claims statement goes out in front of it, both in one unit
   * ending in one Sync. If the claims statement fails, the work is not run and fails with that
   * error; a statement that must be parsed again (DDL, a DEALLOCATE) runs again with its claims.
   * With `read`, a replica serves it when one may (core/replicas.ts); a replica that fails it
   * for want of a connection leaves it to the primary, never to an error.
   */
  async withContext<R extends Row = postgres.Row>(ctx: RequestContext, work: (c: LaneSql) => LaneQuery, opts: ContextOptions = {}): Promise<Rows<R>> {
    const replica = opts.read === true && this.replicas.length > 0 ? nextReplica(this.replicas, this.replicaTurn) : null;
    if (replica !== null) {
      try {
        return await this.runAs<R>(ctx, work, replica);
      } catch (err) {
        if (!replicaFailed(err)) throw err;
        replica.markDown();
      }
    }
    return this.runAs<R>(ctx, work, null);
  }

  private async runAs<R extends Row>(ctx: RequestContext, work: (c: LaneSql) => LaneQuery, replica: Replica | null): Promise<Rows<R>> {
    const lanes = this.lanesFor(ctx.role, replica);
    let timeout = this.timeoutFor(ctx.role);
    if (typeof timeout === 'object' && timeout !== null) timeout = await timeout;
    const span = spanHooks?.child(ctx.requestId, 'db', { 'db.system.name': 'postgresql', 'db.user': ctx.role }) ?? null;
    const lane = lanes.acquire() ?? (await lanes.wait());
    try {
      const rows = await lanes.run<R>(lane, ctx.claims, timeout, work(laneSql), ctx.requestId ?? null);
      span?.end();
      return rows;
    } catch (err) {
      span?.end(err);
      throw err;
    } finally {
      lanes.release(lane);
    }
  }

  /**
   * Several statements in one transaction as `ctx.role` (batch, storage), on the role's
   * transaction pool (same login role as its lanes). The claims are pipelined in front of
   * the first statement `fn` sends; COMMIT follows when `fn` resolves, ROLLBACK when it
   * throws.
   */
  async transactionWithContext<T>(ctx: RequestContext, fn: (c: ReservedSql) => Promise<T>): Promise<T> {
    const lanes = this.lanesFor(ctx.role);
    let timeout = this.timeoutFor(ctx.role);
    if (typeof timeout === 'object' && timeout !== null) timeout = await timeout;
    const c = await this.reserveWithin(lanes.txn);
    try {
      const setup = Promise.all([c`begin`.execute(), c.unsafe(CLAIMS_SQL, [ctx.claims, timeout, ctx.requestId ?? null], { prepare: true }).execute()]);
      const work = fn(c);
      let result: T;
      try {
        [, result] = await Promise.all([setup, work]);
      } catch (err) {
        // Both settle before the rollback: work still running (its setup failed first) must
        // not go on sending statements on this connection after it, or after its release.
        await Promise.allSettled([setup, work]);
        await c`rollback`.catch(() => {});
        throw err;
      }
      await c`commit`;
      return result;
    } finally {
      c.release();
    }
  }

  /**
   * A reserved connection of a role's transaction pool, or `DB_BUSY` (503 `database busy`)
   * after DB_POOL_TIMEOUT_MS. A connection the pool must open waits for the budget, which
   * fails the reservation itself in time; this bound is for the other wait, in the pool's own
   * queue while each of its connections is held by another transaction. A reservation that
   * arrives after it goes straight back to the pool.
   */
  private async reserveWithin(pool: Sql): Promise<ReservedSql> {
    let timer: NodeJS.Timeout | undefined;
    let late = false;
    const reserved = pool.reserve();
    const expired = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        late = true;
        this.budget.refusedAt = performance.now();
        reject(new LaneError('no database connection became free in time', 'DB_BUSY'));
      }, this.budget.timeoutMs);
    });
    try {
      return (await Promise.race([reserved, expired])) as ReservedSql;
    } finally {
      clearTimeout(timer);
      if (late) void reserved.then((c) => c.release(), () => {});
    }
  }

  /** For the metrics: the request lanes of each API role that has had a request. */
  laneStats(): Array<{ role: string; open: number; inUse: number; waiting: number }> {
    return [...this.roles].map(([role, lanes]) => ({ role, ...lanes.stats() }));
  }

  /**
   * true when a trivial query answers within `timeoutMs`, on the listener's connection: the
   * database is reachable, whether or not the request connections are all in use.
   */
  async ping(timeoutMs = 2000): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
      const query = this.listener.query('select 1 as ok').then(
        () => true,
        () => false,
      );
      return await Promise.race([query, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Whether this instance gets the connections it needs: `ok` is false while its listener
   * connection is down, or when within the last `windowMs` (default: DB_POOL_TIMEOUT_MS, at
   * least 5 s) a request waited for a connection in vain or the database refused a new one
   * (max_connections reached, a pooler full, authentication). `/health` answers 503 then;
   * a readiness check should too.
   */
  connectionHealth(windowMs = Math.max(this.budget.timeoutMs, 5000)): ConnectionHealth {
    const refused = this.budget.refusedAt > 0 && performance.now() - this.budget.refusedAt < windowMs;
    return {
      ok: this.listener.connected && !refused,
      listener: this.listener.connected,
      refusedRecently: refused,
      inUse: this.budget.inUse,
      limit: this.budget.limit,
      waiting: this.budget.waiting,
    };
  }

  /** Register a reload for the cache `name`; starts listening on the listener's connection on first use. */
  onCacheReload(name: string, handler: () => void | Promise<void>): void {
    let set = this.cacheHandlers.get(name);
    if (!set) this.cacheHandlers.set(name, (set = new Set()));
    set.add(handler);
    this.listening ??= this.listener.listen(CACHE_CHANNEL, (payload) => void this.dispatchCacheReload(payload)).then(
      (h) => {
        this.listenHandle = h;
        return h;
      },
      // Only once the listener has ended (the service stops): nothing to listen for then.
      () => null,
    );
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

  /**
   * Cancel every statement this instance's request connections are running (a shutdown
   * deadline). Returns how many were cancelled. The owner may signal them: it is granted
   * the login roles (sql/fixtures/core/login_roles.sql).
   */
  async cancelAll(): Promise<number> {
    // On the listener's connection: the request connections may all be taken.
    const [row] = await this.listener.query<{ n: number }>(
      `select count(*) filter (where pg_catalog.pg_cancel_backend(pid))::int as n
         from pg_catalog.pg_stat_activity
        where application_name = $1 and state = 'active' and pid <> pg_catalog.pg_backend_pid()`,
      [this.requestApplicationName],
    );
    return row?.n ?? 0;
  }

  /**
   * End every pool. `timeout` (seconds, default 5): how long queries in flight may finish
   * before their connections are closed; with `cancel: true` running request statements
   * are cancelled first.
   */
  async end(opts: { timeout?: number; cancel?: boolean } = {}): Promise<void> {
    this.ended = true;
    const timeout = opts.timeout ?? 5;
    if (opts.cancel) await this.cancelAll().catch(() => 0);
    await this.listenHandle?.unlisten().catch(() => {});
    await Promise.all([
      ...[...this.roles.values()].map((r) => r.end(timeout)),
      ...this.replicas.map((r) => r.end(timeout)),
      this.sql.end({ timeout }),
      this.background.end({ timeout }),
      this.sqlConsolePool?.end({ timeout }),
      this.listener.end(),
    ]);
  }
}
