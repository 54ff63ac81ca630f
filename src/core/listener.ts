/**
 * The instance's one background connection (outside the request budget): LISTEN for every
 * channel the instance hears (cache reloads, live deltas, broadcast, and graphile-worker's
 * `jobs:insert`, src/worker/index.ts), and the periodic statements (heartbeats, the sweep of
 * dead instances), so that periodic work never keeps a request connection from idling out.
 *
 * `Listener` is what the service uses; two kinds implement it. `ConnectionListener` holds
 * the connection: the service's own when it runs alone, the primary's under WORKERS > 1.
 * There each service process has a `ClusterListener` (src/core/cluster-listener.ts) that
 * asks the primary's over IPC, so an instance holds one LISTEN connection whatever WORKERS is.
 *
 * It reconnects by itself with the lanes' backoff; after each reconnection it listens again
 * to every channel and calls each `onlisten`, which is how a gap (notifications possibly
 * missed) is noticed.
 */
import pg from 'pg';
import type { Logger } from './log.ts';
import { clientConfig, tlsModeOf, type TlsMode } from './lane/client.ts';
import { reconnectBackoff } from './lane/lanes.ts';

interface Listening {
  fn: (payload: string) => void;
  onlisten?: () => void;
}

export interface ListenerOptions {
  url: string;
  applicationName: string;
  log: Logger;
  connectTimeoutMs: number;
}

function quoteIdent(name: string): string {
  return '"' + name.replace(/"/g, '""') + '"';
}

/** What the service's areas use of the instance's background connection. */
export interface Listener {
  /** true while the LISTEN connection is up. */
  readonly connected: boolean;
  /**
   * Hear `channel`: `fn` gets each payload; `onlisten` is called once the LISTEN is in
   * place, and again after every reconnection (notifications may have been missed
   * meanwhile). Resolves when listening (it waits for the database as long as it takes).
   */
  listen(channel: string, fn: (payload: string) => void, onlisten?: () => void): Promise<{ unlisten(): Promise<void> }>;
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<R[]>;
  /** Stop listening; no reconnection after this. */
  end(): Promise<void>;
}

/** The listener that holds the connection. */
export class ConnectionListener implements Listener {
  private readonly o: ListenerOptions;
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;
  private readonly channels = new Map<string, Set<Listening>>();
  private failures = 0;
  private queue: Promise<void> = Promise.resolve();
  private ended = false;
  private readonly watchers = new Set<(connected: boolean) => void>();

  constructor(o: ListenerOptions) {
    this.o = o;
  }

  /** `fn(connected)` whenever the connection comes (before the `onlisten` calls) or goes. */
  watch(fn: (connected: boolean) => void): void {
    this.watchers.add(fn);
  }

  private tell(connected: boolean): void {
    for (const fn of this.watchers) fn(connected);
  }

  /** true while the connection is up. */
  get connected(): boolean {
    return this.client !== null;
  }

  /** The connection, opened (after the backoff, while it fails) when there is none. */
  private connection(): Promise<pg.Client> {
    if (this.client) return Promise.resolve(this.client);
    if (this.ended) return Promise.reject(new Error('the listener has ended'));
    this.connecting ??= (async () => {
      try {
        for (;;) {
          try {
            return await this.connectOnce();
          } catch (err) {
            if (this.ended) throw err;
            this.failures++;
            if (this.failures === 1) this.o.log.warn({ err }, 'listener connection failed; retrying');
            await new Promise((r) => setTimeout(r, reconnectBackoff(this.failures - 1) * 1000).unref());
          }
        }
      } finally {
        this.connecting = null;
      }
    })();
    return this.connecting;
  }

  private async connectOnce(): Promise<pg.Client> {
    const mode = tlsModeOf(this.o.url);
    if (mode !== 'prefer') return this.attempt(mode !== 'disable', mode);
    try {
      return await this.attempt(true, mode);
    } catch (err) {
      // libpq's `prefer`: plaintext when the server does not speak TLS.
      if (!/does not support SSL/.test(String((err as Error).message))) throw err;
      return this.attempt(false, mode);
    }
  }

  /** One connection attempt, TLS as the URL's sslmode says (as the lanes read it). */
  private async attempt(tls: boolean, mode: TlsMode): Promise<pg.Client> {
    const client = new pg.Client({
      ...clientConfig(this.o.url, tls ? mode : 'disable'),
      application_name: this.o.applicationName,
      connectionTimeoutMillis: this.o.connectTimeoutMs,
      keepAlive: true,
    });
    client.on('error', () => {});
    client.connection.on('error', () => {});
    try {
      return await this.setUp(client);
    } catch (err) {
      // A failed attempt: its socket goes; nothing of it may surface later (pg's connection
      // still emits an error for a late TLS refusal).
      client.connection.removeAllListeners('error');
      client.connection.on('error', () => {});
      client.connection.stream.destroy();
      throw err;
    }
  }

  private async setUp(client: pg.Client): Promise<pg.Client> {
    await client.connect();
    if (this.ended) {
      await client.end().catch(() => {});
      throw new Error('the listener has ended');
    }
    client.on('notification', (m) => {
      for (const l of this.channels.get(m.channel) ?? []) l.fn(m.payload ?? '');
    });
    client.on('notice', () => {});
    const lost = () => {
      if (this.client !== client) return;
      this.client = null;
      if (this.ended) return;
      this.tell(false);
      this.o.log.warn('listener connection lost; reconnecting');
      // Reconnect at once when something listens (the backoff spaces failed attempts).
      if (this.channels.size > 0) this.connection().catch(() => {});
    };
    client.on('error', lost);
    client.on('end', lost);
    // Every channel known, including those added while this was on its way.
    const done = new Set<string>();
    for (;;) {
      const names = [...this.channels.keys()].filter((n) => !done.has(n));
      if (names.length === 0) break;
      await client.query(names.map((n) => `LISTEN ${quoteIdent(n)}`).join('; '));
      for (const n of names) done.add(n);
    }
    this.failures = 0;
    this.client = client;
    this.tell(true);
    for (const ls of this.channels.values()) for (const l of ls) l.onlisten?.();
    return client;
  }

  async listen(channel: string, fn: (payload: string) => void, onlisten?: () => void): Promise<{ unlisten(): Promise<void> }> {
    const entry: Listening = { fn, onlisten };
    let set = this.channels.get(channel);
    const first = !set;
    if (!set) this.channels.set(channel, (set = new Set()));
    set.add(entry);
    const unlisten = async () => {
      set.delete(entry);
      if (set.size > 0 || this.channels.get(channel) !== set) return;
      this.channels.delete(channel);
      const c = this.client;
      await this.serial(async () => {
        await c?.query(`UNLISTEN ${quoteIdent(channel)}`);
      }).catch(() => {});
    };
    const client = this.client;
    if (client === null) {
      // The connection on its way listens to every channel known by then, this one included, and calls onlisten.
      await this.connection();
    } else if (!first) {
      onlisten?.();
    } else {
      try {
        await this.serial(() => client.query(`LISTEN ${quoteIdent(channel)}`));
        onlisten?.();
      } catch {
        // The connection went meanwhile: the next one listens to it.
        await this.connection();
      }
    }
    return { unlisten };
  }

  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    return this.serial(async () => {
      const client = await this.connection();
      return (await client.query<R>(text, values)).rows;
    });
  }

  /**
   * `fn` once every statement queued before it has ended: one statement at a time on the
   * connection, LISTEN and UNLISTEN included (node-postgres queues overlapping ones, but
   * deprecates doing so, with a warning in the log).
   */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn);
    this.queue = run.then(
      () => {},
      () => {},
    );
    return run;
  }

  /** Close the connection; no reconnection after this. */
  async end(): Promise<void> {
    this.ended = true;
    const c = this.client;
    this.client = null;
    await c?.end().catch(() => {});
  }
}
