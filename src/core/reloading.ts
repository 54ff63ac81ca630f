/**
 * A value loaded from the database and reloaded when told (a cache NOTIFY, a refresh
 * endpoint): reloads coalesce — a call during a load makes exactly one more load after it,
 * so the newest state always wins — and the value is swapped whole, never seen half-built.
 * Serves the REST catalog, the function catalog and the webhook targets.
 */
export class Reloading<T> {
  private current: T | null = null;
  private running: Promise<void> | null = null;
  private dirty = false;
  private readonly load: () => Promise<T>;

  constructor(load: () => Promise<T>) {
    this.load = load;
  }

  /** The value last loaded, or null before the first load finished. */
  get value(): T | null {
    return this.current;
  }

  /** Reload; resolves when the newest value is in. */
  reload(): Promise<void> {
    this.dirty = true;
    this.running ??= (async () => {
      try {
        while (this.dirty) {
          this.dirty = false;
          this.current = await this.load();
        }
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  /** The current value (without a promise once loaded), loading it first when there is none yet. */
  get(): T | Promise<T> {
    return this.current ?? this.reload().then(() => this.current!);
  }
}
