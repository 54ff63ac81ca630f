/**
 * The re-runs of live queries, off the writers' path (sql/fixtures/live/rerun.sql). A
 * writer only marks a re-run subscription dirty (or, on the fast path of an
 * `as: subscriber` one, queues its transition rows); this instance's poller claims dirty
 * subscriptions and groups (a lease in SQL: one run of each in flight over all instances),
 * runs them and publishes their changes, which every instance forwards.
 *
 * It sleeps until a writer wakes it (NOTIFY `<LIVE_CHANNEL>_wake`, sent while no poller
 * is awake: live_private.pollers). After a step that found work it steps again
 * LIVE_RERUN_MAX_MS after that step began, not at once: what commits meanwhile coalesces
 * into that run, and the re-runs' own CPU, which competes with the writers, is bounded.
 * For a second after its last work it checks every LIVE_RERUN_MAX_MS; idle, once a second.
 *
 * A default-mode subscription is re-run in SQL (its registrant was checked at
 * registration). A group of an `as: subscriber` subscription runs on the request lane of
 * its role with its claims: RLS applies, and SQL running there can never become another
 * role (src/core/db.ts). On the fast path the group's query runs over the rows it has not
 * seen, filtered by the table's policies for its role (live_private.fast_sql); otherwise
 * the query is re-run and diffed.
 */
import type { Deps } from '../core/area.ts';
import * as q from './db.ts';

/** How long a claim holds its lease: past this, another instance may take the work over. */
export const LEASE_MS = 15_000;

/** How long the poller keeps checking every LIVE_RERUN_MAX_MS after its last work. */
const LINGER_MS = 1000;
/** How often an idle poller checks without a wake-up. */
const IDLE_MS = 1000;
/** While changes are queued and taken, the queue is vacuumed at most this often (q.vacuumChanges). */
const VACUUM_MS = 1000;

/**
 * The statement that runs a live query as a subscriber, with the rows cap (one row more, to
 * see it passed), and the snapshot it read in.
 */
export function resultSql(query: string, maxRows: number): string {
  return `select coalesce(jsonb_agg(to_jsonb(q)), '[]'::jsonb)::text as rows, count(*)::int as n, pg_catalog.pg_current_snapshot()::text as snap from (select * from (${query}) q limit ${maxRows + 1}) q`;
}

function contextOf(role: string, claims: string) {
  return { role, claims, claimsObject: JSON.parse(claims) as Record<string, unknown> };
}

/** A live query's result as `role` with `claims` (JSON text), on that role's request lane. */
export async function runAs(deps: Deps, role: string, claims: string, query: string): Promise<{ rows: string; n: number; snap: string }> {
  const [row] = await deps.db.withContext<{ rows: string; n: number; snap: string }>(contextOf(role, claims), (c) =>
    c.unsafe(resultSql(query, deps.config.liveMaxRows), [], { prepare: true }),
  );
  return row;
}

/** A database error's `SQLSTATE|message`, as publish_groups reads it. */
function errorText(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  return `${typeof e.code === 'string' ? e.code : 'XX000'}|${typeof e.message === 'string' ? e.message : String(err)}`;
}

export class Poller {
  private readonly deps: Deps;
  private readonly instanceId: string;
  private stopped = true;
  private waker: (() => void) | null = null;
  private stopper: (() => void) | null = null;
  private woken = false;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private lastWork = 0;
  private lastVacuum = 0;
  private vacuuming: Promise<void> | null = null;
  /** Group re-runs this instance ran (tests count them). */
  groupRuns = 0;
  /** Fast-path deltas this instance computed for groups. */
  groupDeltas = 0;
  /** Default-mode re-runs this instance ran. */
  subscriptionRuns = 0;

  constructor(deps: Deps, instanceId: string) {
    this.deps = deps;
    this.instanceId = instanceId;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.running = this.loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.stopper?.();
    await this.running;
    await this.vacuuming;
  }

  /** A writer's wake-up (or work this instance made): step now, or right after the step in flight. */
  wake(): void {
    this.woken = true;
    this.waker?.();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      this.woken = false;
      const began = Date.now();
      let found = 0;
      try {
        found = await this.step();
      } catch (err) {
        this.deps.log.debug({ err }, 'live: re-run poll failed');
      }
      const now = Date.now();
      if (found > 0) {
        this.lastWork = now;
        // Work keeps coming: the next step LIVE_RERUN_MAX_MS after this one began (a
        // wake-up does not shorten it; only stop does).
        await this.sleep(began + this.deps.config.liveRerunMaxMs - now, false);
      } else if (!this.woken) {
        await this.sleep(now - this.lastWork < LINGER_MS ? this.deps.config.liveRerunMaxMs : IDLE_MS, true);
      }
    }
  }

  /** Sleeps `ms`, or until stop (or a wake-up when `wakes`). */
  private async sleep(ms: number, wakes: boolean): Promise<void> {
    if (ms <= 0 || this.stopped) return;
    await new Promise<void>((resolve) => {
      if (wakes) this.waker = resolve;
      this.stopper = resolve;
      this.timer = setTimeout(resolve, ms);
      this.timer.unref();
    });
    this.waker = null;
    this.stopper = null;
    this.timer = null;
  }

  /** One claim and the re-runs it leased; the number of them. */
  async step(): Promise<number> {
    const sql = this.deps.db.sql;
    const changes = await q.claimChanges(sql, this.instanceId, LEASE_MS);
    const work = await q.claim(sql, this.instanceId, LEASE_MS, changes.length > 0);
    if (work.length === 0 && changes.length === 0) return 0;
    this.vacuum();
    const groups = work.filter((w) => w.group_id !== null);
    const subs = work.filter((w) => w.group_id === null);
    await Promise.all([
      changes.length > 0 ? this.runChanges(changes) : null,
      ...subs.map((w) => {
        this.subscriptionRuns++;
        return q.rerunSubscription(sql, this.instanceId, w.query_id).catch((err: unknown) => {
          this.deps.log.warn({ err, query_id: w.query_id }, 'live: re-run failed');
        });
      }),
      groups.length > 0 ? this.runGroups(groups) : null,
    ]);
    return work.length + changes.length;
  }

  /** The queue's dead rows go (q.vacuumChanges), at most every VACUUM_MS, beside the polls. */
  private vacuum(): void {
    const now = Date.now();
    if (this.vacuuming !== null || now - this.lastVacuum < VACUUM_MS) return;
    this.lastVacuum = now;
    this.vacuuming = q
      .vacuumChanges(this.deps.db.sql)
      .catch((err: unknown) => this.deps.log.debug({ err }, 'live: vacuum of the queued changes failed'))
      .finally(() => {
        this.vacuuming = null;
      });
  }

  /**
   * Table subscriptions' groups (realtime.sql): each group's lane keeps the changes its
   * role may read; then, per subscription, one call publishes them and moves its cursor on.
   */
  private async runChanges(claimed: q.ClaimedChanges[]): Promise<void> {
    const bySub = new Map<string, q.ClaimedChanges[]>();
    for (const c of claimed) {
      const list = bySub.get(c.query_id);
      if (list === undefined) bySub.set(c.query_id, [c]);
      else list.push(c);
    }
    await Promise.all(
      [...bySub].map(async ([queryId, list]) => {
        const outcomes = await Promise.all(
          list.map(async (g): Promise<{ ins: string | null; error: string | null }> => {
            this.groupDeltas++;
            try {
              const [row] = await this.deps.db.withContext<{ ins: string }>(contextOf(g.role, g.claims), (c) => c.unsafe(g.query, [g.ins, null], { prepare: true }));
              return { ins: row.ins, error: null };
            } catch (err) {
              return { ins: null, error: errorText(err) };
            }
          }),
        );
        await q
          .realtimeDone(this.deps.db.sql, this.instanceId, queryId, list[0].snap, list.map((g) => g.group_id), outcomes.map((o) => o.ins), outcomes.map((o) => o.error))
          .catch((err: unknown) => this.deps.log.warn({ err, query_id: queryId }, 'live: table subscription delivery failed'));
      }),
    );
  }

  private async runGroups(groups: q.Claimed[]): Promise<void> {
    const outcomes = await Promise.all(
      groups.map(async (g): Promise<q.GroupOutcome> => {
        const out: q.GroupOutcome = { id: g.group_id!, result: null, ins: null, del: null, snap: null, error: null };
        try {
          if (g.fast) {
            this.groupDeltas++;
            const [row] = await this.deps.db.withContext<{ ins: string; del: string }>(contextOf(g.role!, g.claims!), (c) =>
              c.unsafe(g.query!, [g.ins, g.del], { prepare: true }),
            );
            Object.assign(out, { ins: row.ins, del: row.del, snap: g.snap });
          } else {
            this.groupRuns++;
            const r = await runAs(this.deps, g.role!, g.claims!, g.query!);
            Object.assign(out, { result: r.rows, snap: r.snap });
          }
        } catch (err) {
          out.error = errorText(err);
        }
        return out;
      }),
    );
    await q.publishGroups(this.deps.db.sql, this.instanceId, outcomes);
  }
}
