/**
 * The re-runs of live queries, off the writers' path (sql/fixtures/live/rerun.sql). A
 * writer only marks a re-run subscription dirty; this instance's poller claims dirty
 * subscriptions and groups (a lease in SQL: one re-run of each in flight over all
 * instances), re-runs them and publishes their changes, which every instance forwards.
 * It polls every LIVE_RERUN_MAX_MS while there is nothing to do, and at once again after
 * a step that found work, so a burst of changes coalesces into the next re-run.
 *
 * A default-mode subscription is re-run in SQL (its registrant was checked at
 * registration). A group of an `as: subscriber` subscription runs its query on the
 * request lane of its role with its claims: RLS applies, and SQL running there can never
 * become another role (src/core/db.ts).
 */
import type { Deps } from '../core/area.ts';
import * as q from './db.ts';

/** How long a claim holds its lease: past this, another instance may take the work over. */
export const LEASE_MS = 15_000;

/** The statement that runs a live query as a subscriber, with the rows cap (one row more, to see it passed). */
export function resultSql(query: string, maxRows: number): string {
  return `select coalesce(jsonb_agg(to_jsonb(q)), '[]'::jsonb)::text as rows, count(*)::int as n from (select * from (${query}) q limit ${maxRows + 1}) q`;
}

/** A live query's result as `role` with `claims` (JSON text), on that role's request lane. */
export async function runAs(deps: Deps, role: string, claims: string, query: string): Promise<{ rows: string; n: number }> {
  const ctx = { role, claims, claimsObject: JSON.parse(claims) as Record<string, unknown> };
  const [row] = await deps.db.withContext<{ rows: string; n: number }>(ctx, (c) => c.unsafe(resultSql(query, deps.config.liveMaxRows), [], { prepare: true }));
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
  private wake: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  /** Group re-runs this instance ran (tests count them). */
  groupRuns = 0;
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
    this.wake?.();
    await this.running;
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      let found = 0;
      try {
        found = await this.step();
      } catch (err) {
        this.deps.log.debug({ err }, 'live: re-run poll failed');
      }
      if (found === 0 && !this.stopped) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          this.timer = setTimeout(resolve, this.deps.config.liveRerunMaxMs);
          this.timer.unref();
        });
        this.wake = null;
        this.timer = null;
      }
    }
  }

  /** One claim and the re-runs it leased; the number of them. */
  async step(): Promise<number> {
    const sql = this.deps.db.sql;
    const work = await q.claim(this.deps.db.listener, this.instanceId, LEASE_MS);
    if (work.length === 0) return 0;
    const groups = work.filter((w) => w.group_id !== null);
    const subs = work.filter((w) => w.group_id === null);
    await Promise.all([
      ...subs.map((w) => {
        this.subscriptionRuns++;
        return q.rerunSubscription(sql, this.instanceId, w.query_id).catch((err: unknown) => {
          this.deps.log.warn({ err, query_id: w.query_id }, 'live: re-run failed');
        });
      }),
      groups.length > 0 ? this.runGroups(groups) : null,
    ]);
    return work.length;
  }

  private async runGroups(groups: q.Claimed[]): Promise<void> {
    this.groupRuns += groups.length;
    const results: (string | null)[] = [];
    const errors: (string | null)[] = [];
    await Promise.all(
      groups.map(async (g, i) => {
        try {
          results[i] = (await runAs(this.deps, g.role!, g.claims!, g.query!)).rows;
          errors[i] = null;
        } catch (err) {
          results[i] = null;
          errors[i] = errorText(err);
        }
      }),
    );
    await q.publishGroups(this.deps.db.sql, this.instanceId, groups.map((g) => g.group_id!), results, errors);
  }
}
