/**
 * The cap on image renders one instance runs at once (IMAGE_RENDER_CONCURRENCY, default 1).
 *
 * A render holds one thread of libuv's pool for its whole length (sharp runs its pipelines
 * there), the pool argon2 password hashing and file reads share: four renders at once on the
 * default pool of four stall every sign-in. So renders run at most `size` at a time, well
 * below the pool's size, and libvips runs each on one thread (sharp.concurrency(1), set by
 * the caller): a render costs at most one core, and the pool keeps threads for the rest.
 * A few more wait their turn, at most `waiting` of them and at most `waitMs` each (a page of
 * thumbnails arrives at once); past that the answer is 503 with Retry-After. A request that
 * waits holds no bytes: the source is read once its slot is granted.
 */
import { AppError } from '../core/errors.ts';

const RETRY_AFTER_SECONDS = 1;

export const rendersBusy = () => new AppError(503, 'too many image renders in progress', { headers: { 'retry-after': String(RETRY_AFTER_SECONDS) } });

export class RenderSlots {
  readonly #size: number;
  readonly #waiting: number;
  readonly #waitMs: number;
  #running = 0;
  readonly #queue: (() => void)[] = [];

  constructor(size: number, waiting: number, waitMs: number) {
    this.#size = size;
    this.#waiting = waiting;
    this.#waitMs = waitMs;
  }

  /** Run `work` in a slot; throws 503 `too many image renders in progress` when none comes free in time. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    await this.#acquire();
    try {
      return await work();
    } finally {
      this.#release();
    }
  }

  #acquire(): Promise<void> {
    if (this.#running < this.#size) {
      this.#running++;
      return Promise.resolve();
    }
    if (this.#queue.length >= this.#waiting) return Promise.reject(rendersBusy());
    return new Promise<void>((resolve, reject) => {
      const grant = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        const i = this.#queue.indexOf(grant);
        if (i >= 0) this.#queue.splice(i, 1);
        reject(rendersBusy());
      }, this.#waitMs);
      this.#queue.push(grant);
    });
  }

  /** The slot passes to the next in line, or frees. */
  #release(): void {
    const next = this.#queue.shift();
    if (next) next();
    else this.#running--;
  }
}
