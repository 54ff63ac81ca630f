/**
 * The outbox drain (sql/fixtures/webhooks/outbox.sql): watched tables' triggers append their
 * changes to webhooks_private.outbox, and the drain of every instance that runs jobs takes
 * them in batches (claim_batches: up to 100 attempts of one webhook each) and makes their
 * attempts itself (deliver.ts, makeBatch), several batches at once, up to MAX_IN_FLIGHT
 * attempts: no job in between (docs/decisions/0321-webhook-drains-make-their-own-attempts.md).
 *
 * The drain sleeps until woken (docs/decisions/0302-the-outbox-drain-sleeps-until-woken.md):
 * - a writer notifies `plinth_webhooks` when no drain is awake (so once per burst, never once
 *   per write: a notifying commit serialises the writers); a poll that takes rows records
 *   its instance awake (webhooks_private.drains, decision 0305), one that takes none no
 *   longer;
 * - while work keeps coming it polls again DRAIN_INTERVAL_MS after a poll that took rows (at
 *   once after a full batch: more may wait), as it promised the writers; no poll starts
 *   sooner than that after the last, wake-ups included, so a poll takes the rows of 20 ms;
 *   after an empty poll the interval doubles up to SAFETY_POLL_MS (a writer that saw this
 *   drain awake just before that poll sent no wake-up);
 * - later attempts (a retry, an attempt given back) are due at a time: every poll learns when
 *   the next row is due and sleeps no longer, and a retry this instance queues sets the
 *   timer too (noteDue);
 * - a slow safety poll (SAFETY_POLL_MS) covers a missed wake-up (a writer whose transaction
 *   outlived the short polls after the rows it saw), and a lost LISTEN connection wakes it
 *   when it is back.
 * With no active webhook it only looks every IDLE_CHECK_MS, and a change to the registry (the
 * `webhooks` cache NOTIFY) wakes it.
 */
import type { Deps } from '../core/area.ts';
import { setTimeout as delay } from 'node:timers/promises';
import { anyActiveHook, claimBatches, drainStopped, type Batch } from './db.ts';
import { batchContext, makeBatch, type BatchContext } from './deliver.ts';

/** The channel of the writers' wake-up (outbox.sql, webhooks_private.wake_drains). */
export const WAKE_CHANNEL = 'plinth_webhooks';
/** Between the polls of a drain that keeps finding work: bounds how long a change that sent no wake-up waits. */
export const DRAIN_INTERVAL_MS = 20;
/** The longest sleep while a webhook is active, without a wake-up or a row due. */
export const SAFETY_POLL_MS = 5000;
/** Outbox rows per drain transaction. */
export const DRAIN_BATCH = 500;
/** Attempts in flight per instance: a poll waits for some to end beyond this. */
export const MAX_IN_FLIGHT = 1000;
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
  /** A wake-up came while a poll was in flight: poll again right after it. */
  private woken = false;
  /** When (Date.now()) a row this instance queued is due; 0: none known. */
  private dueAt = 0;
  private loop: Promise<void> | null = null;
  private unlisten: (() => Promise<void>) | null = null;
  /** When (Date.now()) the sleep in progress ends. */
  private sleepUntil = 0;
  /** Aborted when the drain stops: the attempts in flight are cut short and given back. */
  private readonly stopping = new AbortController();
  private readonly ctx: BatchContext;
  /** The batches being made, and their attempts. */
  private readonly inFlight = new Set<Promise<void>>();
  private attemptsInFlight = 0;

  constructor(deps: Deps) {
    this.deps = deps;
    this.ctx = batchContext(deps, (ms) => this.noteDue(ms));
  }

  start(): void {
    this.deps.db.onCacheReload('webhooks', () => {
      this.active = null;
      this.poke();
    });
    // onlisten fires again after the LISTEN connection came back: a wake-up may have been missed.
    void this.deps.db.listener
      .listen(WAKE_CHANNEL, () => this.poke(), () => this.poke())
      .then(
        (h) => {
          this.unlisten = () => h.unlisten();
          if (this.stopped) void h.unlisten();
        },
        (err: unknown) => this.deps.log.warn({ err }, 'webhooks: the outbox wake-up listener stopped'),
      );
    this.loop = this.run();
  }

  /**
   * Stop polling, then say so (webhooks_private.drain_stopped), then cut the attempts in
   * flight short: writers and the attempts this instance gives back wake the other
   * instances at once, not at their safety poll.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
    await drainStopped(this.deps.db.background, this.deps.db.instanceId).catch((err: unknown) =>
      this.deps.log.warn({ err }, 'webhooks: could not mark the outbox drain stopped'),
    );
    this.stopping.abort();
    await Promise.all(this.inFlight);
    await this.unlisten?.();
  }

  /** Make a batch's attempts, counted in flight until it is recorded. */
  private launch(batch: Batch): void {
    const n = batch.items.length;
    this.attemptsInFlight += n;
    const p: Promise<void> = makeBatch(this.ctx, batch, this.stopping.signal).finally(() => {
      this.attemptsInFlight -= n;
      this.inFlight.delete(p);
      // Room again after a full house: poll for what waits.
      if (this.attemptsInFlight + n >= MAX_IN_FLIGHT && this.attemptsInFlight < MAX_IN_FLIGHT) this.poke();
    });
    this.inFlight.add(p);
  }

  /** Poll now, or right after the poll in flight. */
  poke(): void {
    this.woken = true;
    this.wake?.();
  }

  /** A row this instance put in the outbox is due in `ms` (a retry it queued): poll then at the latest. */
  noteDue(ms: number): void {
    const at = Date.now() + Math.max(0, ms);
    if (this.dueAt !== 0 && this.dueAt <= at) return;
    this.dueAt = at;
    // Asleep for longer: the timer moves to `at` (the sleep in progress is cut short, not the poll run early).
    if (this.timer && this.sleepUntil > at) {
      clearTimeout(this.timer);
      this.sleepUntil = at;
      this.timer = setTimeout(() => this.wake?.(), Math.max(0, at - Date.now()));
    }
  }

  private sleep(ms: number): Promise<void> {
    if (this.woken || this.stopped) return Promise.resolve();
    if (this.dueAt !== 0) ms = Math.min(ms, Math.max(0, this.dueAt - Date.now()));
    this.sleepUntil = Date.now() + ms;
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
    const { db, log, metrics } = this.deps;
    // The sleep after an empty poll: doubles from DRAIN_INTERVAL_MS up to SAFETY_POLL_MS.
    let quiet = SAFETY_POLL_MS;
    // No poll starts sooner than DRAIN_INTERVAL_MS after the last one that took fewer than a
    // batch, wake-ups included: a drain that polled as soon as a writer found the outbox
    // empty took one row per poll, and the next writer found it empty again and notified,
    // so every insert cost a notifying commit, a poll and a job of its own.
    let notBefore = 0;
    while (!this.stopped) {
      try {
        if (this.active === null || Date.now() - this.checkedAt > IDLE_CHECK_MS) {
          this.checkedAt = Date.now();
          this.active = await anyActiveHook(db.background);
        }
        if (!this.active) {
          this.woken = false;
          await this.sleep(IDLE_CHECK_MS);
          continue;
        }
        const wait = notBefore - Date.now();
        if (wait > 0) await delay(wait);
        if (this.stopped) break;
        this.woken = false;
        if (this.attemptsInFlight >= MAX_IN_FLIGHT) {
          // Full: the end of a batch pokes the drain.
          await this.sleep(SAFETY_POLL_MS);
          continue;
        }
        if (this.dueAt !== 0 && this.dueAt <= Date.now()) this.dueAt = 0;
        metrics.webhookOutboxPolls.inc();
        const polledAt = Date.now();
        const limit = Math.min(DRAIN_BATCH, MAX_IN_FLIGHT - this.attemptsInFlight);
        const { taken, batches, nextDueMs } = await claimBatches(db.background, limit, db.instanceId);
        for (const b of batches) this.launch(b);
        if (taken >= limit) continue;
        notBefore = polledAt + DRAIN_INTERVAL_MS;
        quiet = taken > 0 || batches.length > 0 ? DRAIN_INTERVAL_MS : Math.min(SAFETY_POLL_MS, quiet * 2);
        // A row due later (or one other drains are taking now) sets the next poll, never sooner than DRAIN_INTERVAL_MS.
        await this.sleep(nextDueMs === null ? quiet : Math.min(quiet, Math.max(DRAIN_INTERVAL_MS, nextDueMs)));
      } catch (err) {
        if (this.stopped) break;
        log.warn({ err }, 'webhooks: the outbox drain failed; trying again');
        await this.sleep(ERROR_BACKOFF_MS);
      }
    }
  }
}
