/**
 * Streaming replicas for reads (DATABASE_READ_URL): which replica serves the next read, and
 * which may not. A replica is skipped while it is down (a connection to it failed lately) or
 * lagging: its lag is measured while reads come, at most every `probeMs`, as the primary's
 * WAL position read first (on the listener's connection) against the position the replica
 * has replayed — caught up, lag 0; behind, the age of the last transaction it replayed. A
 * replica never measured yet, down or lagging more than REPLICA_MAX_LAG_MS serves no read:
 * the read goes to the primary. The lag connection is taken from the instance's budget and
 * idles out like any other.
 */
import type { ConnectionBudget } from './lane/budget.ts';
import type { RoleLanes, Sql } from './lane/lanes.ts';
import { budgetedPool, CONNECT_TIMEOUT_S } from './lane/lanes.ts';

/** How long a replica that failed a connection is left out before it is tried again. */
const DOWN_MS = 2000;

export interface ReplicaOptions {
  url: string;
  budget: ConnectionBudget;
  idleMs: number;
  maxLagMs: number;
  applicationName: string;
  /** The primary's current WAL position (as text), on a connection outside the budget. */
  primaryLsn(): Promise<string>;
}

export class Replica {
  readonly url: string;
  /** Its lanes per API role, as the primary's (same login roles, replicated). */
  readonly roles = new Map<string, RoleLanes>();
  private readonly o: ReplicaOptions;
  private probeSql: Sql | null = null;
  private probing: Promise<void> | null = null;
  /** Last measured lag (ms); null: not measured, or the measure failed. */
  lagMs: number | null = null;
  private measuredAt = -Infinity;
  private downUntil = 0;
  private readonly probeMs: number;

  constructor(o: ReplicaOptions) {
    this.o = o;
    this.url = o.url;
    this.probeMs = Math.min(1000, Math.max(100, o.maxLagMs / 4));
  }

  /** Whether it may serve a read now; starts a new measure of its lag when the last is old. */
  usable(now = performance.now()): boolean {
    if (now - this.measuredAt >= this.probeMs) void this.measure();
    if (now < this.downUntil) return false;
    return this.lagMs !== null && this.lagMs <= this.o.maxLagMs;
  }

  /** A connection to it failed: left out for a while. */
  markDown(): void {
    this.downUntil = performance.now() + DOWN_MS;
    this.lagMs = null;
  }

  private measure(): Promise<void> {
    this.probing ??= (async () => {
      this.measuredAt = performance.now();
      try {
        this.probeSql ??= budgetedPool(this.o.url, this.o.budget, this.o.idleMs, {
          max: 1,
          prepare: false,
          connect_timeout: CONNECT_TIMEOUT_S,
          fetch_types: false,
          onnotice: () => {},
          connection: { application_name: this.o.applicationName },
        });
        const primary = await this.o.primaryLsn();
        const [row] = await this.probeSql<{ lag: number | null }[]>`
          select case
                   when not pg_catalog.pg_is_in_recovery() then null
                   when pg_catalog.pg_last_wal_replay_lsn() >= ${primary}::pg_lsn then 0
                   else (extract(epoch from pg_catalog.clock_timestamp() - pg_catalog.pg_last_xact_replay_timestamp()) * 1000)::float8
                 end as lag`;
        this.lagMs = row?.lag ?? null;
      } catch {
        this.markDown();
      } finally {
        this.probing = null;
      }
    })();
    return this.probing;
  }

  async end(timeout: number): Promise<void> {
    await Promise.all([...[...this.roles.values()].map((r) => r.end(timeout)), this.probeSql?.end({ timeout })]);
  }
}

/**
 * A replica's failure that the same read on the primary avoids: no connection (refused, lost,
 * timed out), the server shutting down or starting, too many connections, a login refused,
 * a query cancelled by a conflict with recovery. Not: the budget spent (`DB_BUSY`), or an
 * error of the query itself.
 */
export function replicaFailed(err: unknown): boolean {
  const e = err as { code?: unknown; severity?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (code === 'DB_BUSY') return false;
  if (e.severity === undefined) return true;
  return /^(08|57P|53|28)/.test(code) || code === '40001';
}

/** Round-robin over the replicas, skipping those that may not serve now; null: none may (the primary serves). */
export function nextReplica(replicas: readonly Replica[], turn: { n: number }): Replica | null {
  const now = performance.now();
  for (let i = 0; i < replicas.length; i++) {
    const r = replicas[turn.n++ % replicas.length];
    if (r.usable(now)) return r;
  }
  return null;
}
