/**
 * The database: the owner pool (migrations' role: the service's own auth/admin/webhook/
 * storage functions, `/api/sql`), one LISTEN connection for cache reloads, and the request
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
 * One Sync per request: on a lane the claims statement goes out in front of the work, as its
 * prelude, and both end in a single Sync, one implicit transaction; the driver sees one query
 * (see pipeline.ts); `prepare: true` everywhere.
 */
import { hkdfSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import type { Logger } from './log.ts';
import { CLAIMS_SQL, PipelineSocket, claimsPrelude, connectTls, tlsModeOf, type TlsMode } from './pipeline.ts';

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

/** The channel every cache listens on; the payload names the cache (`rest`, `functions`, `live`, `roles` …). */
export const CACHE_CHANNEL = 'plinth_cache';

/** The login role of each API role's lanes; the guest role (ANONYMOUS_ROLE) logs in as `plinth_guest`. */
export const LOGIN_ROLES: Readonly<Record<string, string>> = Object.freeze({
  anon: 'plinth_anon',
  authenticated: 'plinth_authenticated',
  service_role: 'plinth_service',
});
export const GUEST_LOGIN_ROLE = 'plinth_guest';

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

/**
 * Whether the driver carries the repairs and the prelude `npm install` applies
 * (scripts/patch-deps.ts): an install with `--ignore-scripts` skips them, and then lanes can
 * hang after a lost connection, and refuse every request (their claims never go out).
 */
export function driverRepaired(): boolean {
  try {
    const connection = readFileSync(fileURLToPath(new URL('./connection.js', import.meta.resolve('postgres'))), 'utf8');
    return connection.includes('/* plinth-patch */') && connection.includes('/* plinth-patch: prelude */');
  } catch {
    return false;
  }
}

export interface DbOptions {
  url: string;
  /** Lanes of `withContext` per API role (DB_POOL_SIZE); the owner pool has as many connections. */
  poolSize: number;
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
}

/**
 * Seconds before the next connection attempt after `attempt` failed ones: 0.05, 0.1, 0.2 …
 * up to 2 s. The driver's default grows to 20 s, so after an outage of a few seconds the
 * service would go on failing requests for up to 20 s once the database is back.
 */
export const reconnectBackoff = (attempt: number): number => Math.min(0.05 * 2 ** attempt, 2);

/** Seconds a connection attempt may take (with TLS: the negotiation, then the driver's startup, each). */
const CONNECT_TIMEOUT_S = 2;

/** Requests in flight on one lane at most: well under the driver's 100-query pipeline. */
const LANE_DEPTH = 16;

/**
 * Requests a lane takes before the next lane is used: requests that share a lane leave in
 * one socket write and reach PostgreSQL in one read (fewer system calls and wake-ups on both
 * sides), at the price of waiting behind each other on it. Measured with 16 requests in
 * flight (npm run bench): 1 (the least busy lane, as before) 0.67–0.79 of the limit for a
 * get by key; 4: 1.03–1.07; 8: 1.16–1.19 but inserts fell to 0.77–0.89 (fewer backends
 * committing at once, less group commit).
 */
const LANE_SHARE = 4;

/** A lane with requests in flight that answered none for this long is held by a slow statement: no more requests join it. */
const LANE_STALL_MS = 2;

interface Lane {
  sql: Sql;
  inflight: number;
  /** When it last answered a request (performance.now()). */
  answered: number;
}

/** The URL without its TLS parameters: the lanes negotiate TLS themselves (connectTls). */
function withoutTls(url: string): string {
  const u = new URL(url);
  for (const k of ['sslmode', 'ssl', 'sslrootcert']) u.searchParams.delete(k);
  return u.toString();
}

/** Everything of one API role: its lanes (pipelined single requests) and its transaction pool. */
class RoleLanes {
  private readonly lanes: Lane[];
  private readonly waiting: Array<(lane: Lane) => void> = [];
  private txnPool: Sql | null = null;
  /** TLS to the database, negotiated by the lane's socket so that its pipeline layer sees plaintext. */
  private readonly tls: TlsMode;

  private readonly url: string;
  private readonly count: number;
  private readonly applicationName: string;
  readonly apiRole: string;

  constructor(url: string, count: number, applicationName: string, apiRole: string) {
    this.url = url;
    this.count = count;
    this.applicationName = applicationName;
    this.apiRole = apiRole;
    this.tls = tlsModeOf(url);
    this.lanes = Array.from({ length: count }, () => ({ inflight: 0, answered: 0, sql: this.connect(1, true) }));
    // Connect every lane now, in the background: the later lanes are used only when requests
    // pile up (LANE_SHARE), and a request sent to a lane that is still connecting would wait
    // for the connection, the driver's type query and the claims statement's Parse.
    for (const l of this.lanes) void l.sql.reserve().then((r) => r.release(), () => {});
  }

  private connect(max: number, pipelined: boolean): Sql {
    return postgres(pipelined ? withoutTls(this.url) : this.url, {
      max,
      prepare: true,
      connect_timeout: CONNECT_TIMEOUT_S,
      // A lane stays connected while idle: the driver re-arms an idle timer each time a
      // connection goes idle, a timer per request on the hot path. Lanes connect up front
      // (constructor), and max_lifetime still renews them.
      idle_timeout: pipelined ? 0 : 60,
      max_lifetime: 60 * 30,
      onnotice: () => {},
      backoff: reconnectBackoff,
      // The session role is the API role (set on the login role as well; this makes it so
      // even where a DBA left that out).
      connection: { application_name: this.applicationName, role: this.apiRole },
      ...(pipelined
        ? {
            socket: (o: { host: string[]; port: number[]; path?: string | false }) => {
              // PostgreSQL does not speak TLS on a Unix socket (libpq ignores sslmode there).
              if (o.path) return new PipelineSocket().connect(o.path);
              // No Nagle: a lane writes while earlier requests are unanswered, and a write held
              // for their ACK (which PostgreSQL may delay) stalls every request behind it.
              if (this.tls === 'disable') return new PipelineSocket().connect(o.port[0], o.host[0]).setNoDelay(true);
              return connectTls(o.host[0], o.port[0], this.tls, CONNECT_TIMEOUT_S * 1000);
            },
          }
        : {}),
    } as postgres.Options<Record<string, never>>) as unknown as Sql;
  }

  get txn(): Sql {
    return (this.txnPool ??= this.connect(this.count, false));
  }

  /**
   * The first lane (in order) with fewer than LANE_SHARE requests in flight that is moving
   * (it answered a request within LANE_STALL_MS, or has none in flight), else the least busy
   * lane with room, else null (every lane full). Requests gather on few lanes, and leave in
   * one write; a lane held by a slow statement takes no more requests behind it.
   */
  acquire(): Lane | null {
    const now = performance.now();
    let best: Lane | null = null;
    for (const l of this.lanes) {
      if (l.inflight < LANE_SHARE && (l.inflight === 0 || now - l.answered < LANE_STALL_MS)) {
        best = l;
        break;
      }
      if (l.inflight < LANE_DEPTH && (best === null || l.inflight < best.inflight)) best = l;
    }
    if (best) best.inflight++;
    return best;
  }

  wait(): Promise<Lane> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  release(lane: Lane): void {
    lane.answered = performance.now();
    const next = this.waiting.shift();
    if (next) next(lane);
    else lane.inflight--;
  }

  async end(timeout: number): Promise<void> {
    await Promise.all([...this.lanes.map((l) => l.sql.end({ timeout })), this.txnPool?.end({ timeout })]);
  }
}

export class Db {
  /** The owner pool (auth, admin, webhooks, storage, jobs, /api/sql): runs as the connecting role. */
  readonly sql: Sql;
  private readonly roles = new Map<string, RoleLanes>();
  private readonly opts: DbOptions;
  private readonly log: Logger;
  private readonly anonymousRole: string;
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
    this.sql = postgres(opts.url, {
      max: opts.poolSize,
      prepare: true,
      connect_timeout: CONNECT_TIMEOUT_S,
      idle_timeout: 60,
      max_lifetime: 60 * 30,
      onnotice: () => {},
      backoff: reconnectBackoff,
      connection: { application_name: opts.applicationName ?? 'plinth' },
    }) as Sql;
    this.requestApplicationName = `${opts.applicationName ?? 'plinth'}-requests-${randomBytes(4).toString('hex')}`;
    if (!driverRepaired()) {
      this.log.warn(
        'the postgres driver lacks the changes npm install applies (installed with --ignore-scripts?): run `node scripts/patch-deps.ts`; without them requests as API roles fail, and a connection lost at the wrong moment can hang',
      );
    }
    this.onCacheReload('roles', () => this.reloadTimeouts());
  }

  /** The lanes of an API role (created on first use). */
  private lanesFor(apiRole: string): RoleLanes {
    let r = this.roles.get(apiRole);
    if (r) return r;
    const login = loginRoleFor(apiRole, this.anonymousRole);
    if (login === null) throw new Error(`no request lane for the role "${apiRole}"`);
    const u = new URL(this.opts.url);
    u.username = login;
    const password =
      this.opts.requestPassword ?? (this.opts.secret !== undefined ? deriveLoginPassword(this.opts.secret, login) : null);
    u.password = password === null ? '' : encodeURIComponent(password);
    r = new RoleLanes(u.toString(), this.opts.poolSize, this.requestApplicationName, apiRole);
    this.roles.set(apiRole, r);
    return r;
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
   * trip. `work` must return the (not yet executed) query, built on the `c` it is given; the
   * claims statement goes out in front of it (its prelude), and both end in one Sync. If the
   * claims statement fails, the work is not run and fails with that error; a query the
   * driver retries (a statement re-prepared after DDL) carries its claims again.
   */
  async withContext<R extends postgres.Row = postgres.Row>(
    ctx: RequestContext,
    work: (c: Sql) => postgres.PendingQuery<R[]>,
  ): Promise<postgres.RowList<R[]>> {
    const lanes = this.lanesFor(ctx.role);
    let timeout = this.timeoutFor(ctx.role);
    if (typeof timeout === 'object' && timeout !== null) timeout = await timeout;
    const lane = lanes.acquire() ?? (await lanes.wait());
    try {
      const q = work(lane.sql) as postgres.PendingQuery<R[]> & WithPrelude;
      q.options.prelude = claimsPrelude(ctx.claims, timeout);
      // The extended protocol always (a query without parameters would go as a simple
      // Query, which has no place for a prelude: the lane would refuse it).
      q.options.simple = false;
      return await q.execute();
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
    const c = await lanes.txn.reserve();
    try {
      const setup = Promise.all([c`begin`.execute(), c.unsafe(CLAIMS_SQL, [ctx.claims, timeout], { prepare: true }).execute()]);
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

  /**
   * Cancel every statement this instance's request connections are running (a shutdown
   * deadline). Returns how many were cancelled. The owner may signal them: it is granted
   * the login roles (sql/fixtures/core/login_roles.sql).
   */
  async cancelAll(): Promise<number> {
    const [row] = await this.sql<{ n: number }[]>`
      select count(*) filter (where pg_catalog.pg_cancel_backend(pid))::int as n
        from pg_catalog.pg_stat_activity
       where application_name = ${this.requestApplicationName} and state = 'active' and pid <> pg_catalog.pg_backend_pid()`;
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
    await Promise.all([...[...this.roles.values()].map((r) => r.end(timeout)), this.sql.end({ timeout })]);
  }
}

/** What of the driver's query `withContext` sets: read by the driver as patched (scripts/patch-deps.ts). */
interface WithPrelude {
  options: { prelude?: Buffer; simple?: boolean };
}
