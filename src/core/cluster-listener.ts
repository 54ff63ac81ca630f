/**
 * One LISTEN connection per instance under WORKERS > 1 (src/core/cluster.ts): the primary
 * holds the instance's `ConnectionListener` and serves nothing else of the service; each
 * service process has a `ClusterListener`, the same `Listener` to its areas (cache reloads,
 * live deltas and broadcast, the webhook outbox's wake-up, graphile-worker's `jobs:insert` in
 * process 1), whose channels and statements go to the primary over IPC.
 *
 * - A process asks for a channel once (`listen`), however many of its areas hear it; the
 *   primary listens for it on that process's behalf and forwards each payload (`notify`; a
 *   NOTIFY payload is at most 8000 bytes, nothing for IPC). After the LISTEN, and again after
 *   every reconnection of the primary's connection, the primary says `listening` for each of
 *   the process's channels: the process calls its `onlisten`s, so a gap is noticed in every
 *   process. `listener-state` tells every process when the connection goes and comes back
 *   (`connected`: /health, `plinth_db_up`).
 * - A process that exits loses its channels at the primary; the process that replaces it asks
 *   for its own as its areas start, like any starting process.
 * - The periodic statements (`query`: instance and live heartbeats, the live membership
 *   sync, /health's ping, the cancel of a shutdown, a replica's lag probe) go to the primary
 *   too and run on its connection, one at a time with those of the other processes. They are
 *   few and short, and on that connection they keep what they had on a process's own: they
 *   take nothing from DB_POOL_SIZE, keep no request connection from idling out, and still run
 *   when every request connection is busy (a ping, the cancel at a shutdown deadline). Run on
 *   each process's own pools instead, N processes would hold up to N more connections awake.
 *   Rows come back through the IPC channel's `advanced` serialization (a timestamp stays a
 *   Date); an error keeps its message, SQLSTATE `code` and `severity`.
 */
import type { Worker } from 'node:cluster';
import type pg from 'pg';
import type { ConnectionListener, Listener } from './listener.ts';

interface QueryError {
  message: string;
  code?: string;
  severity?: string;
}

/** The listener's messages between the primary and a process (a part of ClusterMessage). */
export type ListenerMessage =
  // process → primary
  | { plinth: 'listener-join' }
  | { plinth: 'listen'; channel: string }
  | { plinth: 'unlisten'; channel: string }
  | { plinth: 'listener-query'; id: number; text: string; values: unknown[] }
  // primary → process
  | { plinth: 'listener-state'; connected: boolean }
  | { plinth: 'listening'; channel: string }
  | { plinth: 'notify'; channel: string; payload: string }
  | { plinth: 'listener-answer'; id: number; rows?: unknown[]; error?: QueryError };

type Handle = Promise<{ unlisten(): Promise<void> } | null>;

function toProcess(w: Worker, m: ListenerMessage): void {
  if (w.isConnected()) w.send(m);
}

/** The primary's side: each process's channels on the one connection, its statements run there. */
export class ListenerHub {
  private readonly listener: ConnectionListener;
  /** Per process, its channels (the primary's listen for each). */
  private readonly processes = new Map<Worker, Map<string, Handle>>();
  private connected = false;

  constructor(listener: ConnectionListener) {
    this.listener = listener;
    listener.watch((connected) => {
      this.connected = connected;
      for (const w of this.processes.keys()) toProcess(w, { plinth: 'listener-state', connected });
    });
  }

  private channelsOf(w: Worker): Map<string, Handle> {
    let channels = this.processes.get(w);
    if (!channels) this.processes.set(w, (channels = new Map<string, Handle>()));
    return channels;
  }

  /** A message of process `w`: true when it was the listener's. */
  handle(w: Worker, m: { plinth: string }): boolean {
    const msg = m as ListenerMessage;
    switch (msg.plinth) {
      case 'listener-join':
        this.channelsOf(w);
        toProcess(w, { plinth: 'listener-state', connected: this.connected });
        return true;
      case 'listen': {
        const channels = this.channelsOf(w);
        const { channel } = msg;
        if (channels.has(channel)) return true;
        const h = this.listener.listen(
          channel,
          (payload) => toProcess(w, { plinth: 'notify', channel, payload }),
          () => toProcess(w, { plinth: 'listening', channel }),
        );
        channels.set(channel, h.catch(() => null));
        return true;
      }
      case 'unlisten': {
        const channels = this.processes.get(w);
        const h = channels?.get(msg.channel);
        channels?.delete(msg.channel);
        void h?.then((l) => l?.unlisten()).catch(() => {});
        return true;
      }
      case 'listener-query':
        void this.query(w, msg.id, msg.text, msg.values);
        return true;
      default:
        return false;
    }
  }

  private async query(w: Worker, id: number, text: string, values: unknown[]): Promise<void> {
    try {
      toProcess(w, { plinth: 'listener-answer', id, rows: await this.listener.query(text, values) });
    } catch (err) {
      const e = err as { message?: unknown; code?: unknown; severity?: unknown };
      const error: QueryError = { message: typeof e?.message === 'string' ? e.message : String(err) };
      if (typeof e?.code === 'string') error.code = e.code;
      if (typeof e?.severity === 'string') error.severity = e.severity;
      toProcess(w, { plinth: 'listener-answer', id, error });
    }
  }

  /** Process `w` exited: its channels go (UNLISTEN once no process hears one). */
  drop(w: Worker): void {
    const channels = this.processes.get(w);
    this.processes.delete(w);
    for (const h of channels?.values() ?? []) void h.then((l) => l?.unlisten()).catch(() => {});
  }
}

interface Listening {
  fn: (payload: string) => void;
  onlisten?: () => void;
}

interface Channel {
  entries: Set<Listening>;
  /** The primary said `listening` since the connection last came (back). */
  listening: boolean;
  waiting: Array<{ resolve(): void; reject(err: Error): void }>;
}

function toPrimary(m: ListenerMessage): void {
  if (process.send && process.connected) process.send(m);
}

/** A service process's side (one of WORKERS > 1): the `Listener` its areas use, served by the primary. */
export class ClusterListener implements Listener {
  private readonly channels = new Map<string, Channel>();
  private readonly answers = new Map<number, { resolve(rows: unknown[]): void; reject(err: Error): void }>();
  private nextId = 1;
  private up = false;
  /** Why nothing more is served (ended, or the primary gone), or null. */
  private over: string | null = null;
  private readonly onMessage = (m: unknown) => this.receive(m);
  private readonly onDisconnect = () => this.stop('the primary process is gone');

  constructor() {
    process.on('message', this.onMessage);
    process.once('disconnect', this.onDisconnect);
    toPrimary({ plinth: 'listener-join' });
  }

  get connected(): boolean {
    return this.up && this.over === null;
  }

  async listen(channel: string, fn: (payload: string) => void, onlisten?: () => void): Promise<{ unlisten(): Promise<void> }> {
    if (this.over !== null) throw new Error(this.over);
    const entry: Listening = { fn, onlisten };
    let ch = this.channels.get(channel);
    if (!ch) {
      this.channels.set(channel, (ch = { entries: new Set(), listening: false, waiting: [] }));
      toPrimary({ plinth: 'listen', channel });
    }
    ch.entries.add(entry);
    const c = ch;
    const unlisten = async () => {
      c.entries.delete(entry);
      if (c.entries.size > 0 || this.channels.get(channel) !== c) return;
      this.channels.delete(channel);
      toPrimary({ plinth: 'unlisten', channel });
    };
    // Listening already: this entry's onlisten now. Otherwise the primary's `listening` calls every entry's.
    if (c.listening) onlisten?.();
    else await new Promise<void>((resolve, reject) => c.waiting.push({ resolve, reject }));
    return { unlisten };
  }

  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
    if (this.over !== null) return Promise.reject(new Error(this.over));
    const id = this.nextId++;
    return new Promise<R[]>((resolve, reject) => {
      this.answers.set(id, { resolve: resolve as (rows: unknown[]) => void, reject });
      toPrimary({ plinth: 'listener-query', id, text, values });
    });
  }

  private receive(raw: unknown): void {
    if (typeof raw !== 'object' || raw === null || this.over !== null) return;
    const m = raw as ListenerMessage;
    if (m.plinth === 'notify') {
      for (const l of this.channels.get(m.channel)?.entries ?? []) l.fn(m.payload);
    } else if (m.plinth === 'listening') {
      const ch = this.channels.get(m.channel);
      if (!ch) return;
      ch.listening = true;
      for (const l of ch.entries) l.onlisten?.();
      for (const w of ch.waiting.splice(0)) w.resolve();
    } else if (m.plinth === 'listener-state') {
      this.up = m.connected;
      // Gone: each channel waits for the primary's next `listening` (after the reconnection).
      if (!m.connected) for (const ch of this.channels.values()) ch.listening = false;
    } else if (m.plinth === 'listener-answer') {
      const a = this.answers.get(m.id);
      if (!a) return;
      this.answers.delete(m.id);
      if (m.error) a.reject(Object.assign(new Error(m.error.message), m.error.code ? { code: m.error.code } : {}, m.error.severity ? { severity: m.error.severity } : {}));
      else a.resolve(m.rows ?? []);
    }
  }

  /** Nothing more: waiting listens and statements fail with `why`. */
  private stop(why: string): void {
    if (this.over !== null) return;
    this.over = why;
    process.off('message', this.onMessage);
    process.off('disconnect', this.onDisconnect);
    const err = new Error(why);
    for (const ch of this.channels.values()) for (const w of ch.waiting.splice(0)) w.reject(err);
    for (const a of this.answers.values()) a.reject(err);
    this.answers.clear();
  }

  async end(): Promise<void> {
    const channels = [...this.channels.keys()];
    this.stop('the listener has ended');
    for (const channel of channels) toPrimary({ plinth: 'unlisten', channel });
    this.channels.clear();
  }
}
