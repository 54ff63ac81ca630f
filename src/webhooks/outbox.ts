/**
 * The outbox drain (sql/fixtures/webhooks/outbox.sql): watched tables' triggers append their
 * changes to webhooks_private.outbox without notifying anyone, and every instance moves them
 * into webhooks__deliver jobs here, in batches, through graphile-worker's public add_jobs
 * (whose one NOTIFY per batch wakes the workers at once). Later attempts (retries, attempts
 * given back, redeliveries) wait in the outbox until due, so this poll makes them on time.
 *
 * The poll runs every DRAIN_INTERVAL_MS while some webhook is active (or a row still waits),
 * and at once again when a batch came back full. With no active webhook it only looks
 * every IDLE_CHECK_MS, and a change to the registry (the `webhooks` cache NOTIFY) wakes it.
 */
import type { Deps } from '../core/area.ts';
import { anyActiveHook, drainOutbox } from './db.ts';

/** Between polls of a quiet outbox: bounds how long a committed change waits for its job. */
export const DRAIN_INTERVAL_MS = 20;
/** Outbox rows per drain transaction. */
export const DRAIN_BATCH = 500;
const IDLE_CHECK_MS = 5000;
const ERROR_BACKOFF_MS = 1000;

export class OutboxDrain {
  private readonly deps: Deps;
  private stopped = false;
  /** null: to be looked up (at start, after a registry change, and every IDLE_CHECK_MS). */
  private active: boolean | null = null;
  private checkedAt = 0;
  private timer: NodeJS.Timeout | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;

  constructor(deps: Deps) {
    this.deps = deps;
  }

  start(): void {
    this.deps.db.onCacheReload('webhooks', () => {
      this.active = null;
      this.wake?.();
    });
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = () => {
        if (this.timer) clearTimeout(this.timer);
        this.timer = null;
        this.wake = null;
        resolve();
      };
      this.timer = setTimeout(() => this.wake?.(), ms);
    });
  }

  private async run(): Promise<void> {
    const { db, log } = this.deps;
    while (!this.stopped) {
      try {
        if (this.active === null || Date.now() - this.checkedAt > IDLE_CHECK_MS) {
          this.checkedAt = Date.now();
          this.active = await anyActiveHook(db.sql);
        }
        if (!this.active) {
          await this.sleep(IDLE_CHECK_MS);
          continue;
        }
        const n = await drainOutbox(db.sql, DRAIN_BATCH);
        if (n < DRAIN_BATCH) await this.sleep(DRAIN_INTERVAL_MS);
      } catch (err) {
        if (this.stopped) break;
        log.warn({ err }, 'webhooks: the outbox drain failed; trying again');
        await this.sleep(ERROR_BACKOFF_MS);
      }
    }
  }
}
