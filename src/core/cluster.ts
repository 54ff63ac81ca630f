/**
 * WORKERS > 1: the primary process (src/boot.ts starts it after the embedded database and the
 * migrations) forks that many service processes. Each binds the port itself with SO_REUSEPORT
 * (`reusePort`): the kernel spreads the accepted connections over the processes' sockets, and
 * no connection passes through the primary. (Node's cluster alternatives: round-robin makes
 * the primary accept every connection and hand it on; SCHED_NONE, one shared socket, lets
 * Linux wake the process that last waited, which piles the connections onto few processes.)
 *
 * The primary serves nothing: it starts the processes (numbered 1…N; the job worker runs in
 * number 1 only), prints the start banner once all of them listen (number 1 writes it), sums
 * their metrics for a scrape, replaces a process that dies (the same number: its share of the
 * connection budget and its name in the instance registry), and on SIGTERM asks them all to
 * drain, then exits 0 once every one exited 0.
 *
 * It also holds the instance's one LISTEN connection (src/core/cluster-listener.ts): the
 * processes hear their channels and run their periodic statements through it, over IPC.
 */
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import { ListenerHub, type ListenerMessage } from './cluster-listener.ts';
import type { ConnectionListener } from './listener.ts';
import type { Logger } from './log.ts';

/** Messages between the primary and the processes (IPC). */
export type ClusterMessage =
  | { plinth: 'ready'; banner: string[] | null }
  | { plinth: 'scrape'; id: number }
  | { plinth: 'collect'; id: number }
  | { plinth: 'collected'; id: number; metrics: unknown[] }
  | { plinth: 'scraped'; id: number; contentType: string; body: string }
  | { plinth: 'backup'; seconds: number }
  | ListenerMessage;

export function isClusterMessage(m: unknown): m is ClusterMessage {
  return typeof m === 'object' && m !== null && typeof (m as { plinth?: unknown }).plinth === 'string';
}

export interface WorkerSetOptions {
  workers: number;
  log: Logger;
  /** Set in every process's environment (the resolved port, the database URL, no migrations). */
  env: Record<string, string>;
  /** The instance's LISTEN connection, for every process; ended once they all exited. */
  listener: ConnectionListener;
}

export interface WorkerSet {
  /** The banner lines process 1 wrote, once every process listens. */
  banner: string[];
  /** Send every process a message (a backup's time for its metric). */
  broadcast(m: ClusterMessage): void;
  /** SIGTERM to every process; resolves true once all exited 0. */
  stop(): Promise<boolean>;
}

/** A process that dies within this long of its start is replaced after a pause (a crash loop does not spin). */
const QUICK_DEATH_MS = 10_000;
const RESTART_PAUSE_MS = 1000;
/** How long a scrape waits for the processes' samples (one that does not answer is left out). */
const COLLECT_TIMEOUT_MS = 3000;

export function startWorkerSet(o: WorkerSetOptions): Promise<WorkerSet> {
  const byIndex = new Map<number, Worker>();
  const startedAt = new Map<number, number>();
  let stopping = false;
  let starting = true;
  let banner: string[] = [];
  const exitCodes: number[] = [];
  const collects = new Map<number, { got: unknown[][]; want: number; done: () => void }>();
  let nextId = 1;
  const hub = new ListenerHub(o.listener);
  // IPC as structured clone: the rows of a process's statement on the listener keep their types (a Date stays one).
  cluster.setupPrimary({ serialization: 'advanced' });

  return new Promise<WorkerSet>((resolve, reject) => {
    const ready = new Set<number>();
    const fork = (index: number) => {
      const w = cluster.fork({ ...o.env, PLINTH_WORKER: String(index), PLINTH_WORKERS: String(o.workers) });
      byIndex.set(index, w);
      startedAt.set(index, Date.now());
      // A message sent while the process dies (its pipe closed before its exit is seen) fails
      // with an error on the worker: logged here, never an unhandled error of the primary.
      w.on('error', (err) => o.log.warn({ err, worker: index }, `service process ${index}: message not delivered`));
      w.on('message', (m: unknown) => {
        if (isClusterMessage(m) && !hub.handle(w, m)) void onMessage(index, w, m);
      });
      w.on('exit', (code, signal) => {
        hub.drop(w);
        if (byIndex.get(index) === w) byIndex.delete(index);
        exitCodes.push(code ?? 1);
        if (stopping) return;
        if (starting) {
          stopAll();
          void o.listener.end();
          reject(new Error(`service process ${index} exited during start (${signal ?? `code ${code}`})`));
          return;
        }
        const quick = Date.now() - (startedAt.get(index) ?? 0) < QUICK_DEATH_MS;
        o.log.warn({ worker: index, pid: w.process.pid, code, signal }, `service process ${index} (pid ${w.process.pid}) exited (${signal ?? `code ${code}`}): starting another`);
        setTimeout(() => !stopping && fork(index), quick ? RESTART_PAUSE_MS : 0);
      });
    };

    const onMessage = async (index: number, w: Worker, m: ClusterMessage) => {
      if (m.plinth === 'ready') {
        if (m.banner !== null) banner = m.banner;
        ready.add(index);
        if (starting && ready.size === o.workers) {
          starting = false;
          resolve({ banner, broadcast, stop });
        } else if (!starting) {
          o.log.info({ worker: index, pid: w.process.pid }, `service process ${index} replaced (pid ${w.process.pid})`);
        }
      } else if (m.plinth === 'scrape') {
        const scraped = await scrape();
        if (w.isConnected()) w.send({ plinth: 'scraped', id: m.id, ...scraped } satisfies ClusterMessage);
      } else if (m.plinth === 'collected') {
        const c = collects.get(m.id);
        if (c) {
          c.got.push(m.metrics);
          if (c.got.length >= c.want) c.done();
        }
      }
    };

    /** Every process's samples, summed, and which processes answered (plinth_worker_info). */
    const scrape = async (): Promise<{ contentType: string; body: string }> => {
      const id = nextId++;
      const live = [...byIndex.entries()].filter(([, w]) => w.isConnected());
      const got: unknown[][] = [];
      await new Promise<void>((done) => {
        const timer = setTimeout(done, COLLECT_TIMEOUT_MS);
        collects.set(id, { got, want: live.length, done: () => (clearTimeout(timer), done()) });
        for (const [, w] of live) w.send({ plinth: 'collect', id } satisfies ClusterMessage);
        if (live.length === 0) done();
      });
      collects.delete(id);
      const registry = AggregatorRegistry.aggregate(got);
      const info = [
        '# HELP plinth_worker_info The service processes of this instance (WORKERS): 1 per running process, by number and pid',
        '# TYPE plinth_worker_info gauge',
        ...live.map(([index, w]) => `plinth_worker_info{worker="${index}",pid="${w.process.pid}"} 1`),
      ];
      return { contentType: registry.contentType, body: (await registry.metrics()) + info.join('\n') + '\n' };
    };

    const broadcast = (m: ClusterMessage) => {
      for (const w of byIndex.values()) if (w.isConnected()) w.send(m);
    };

    const stopAll = () => {
      stopping = true;
      for (const w of byIndex.values()) if (w.process.exitCode === null) w.process.kill('SIGTERM');
    };

    const stop = async (): Promise<boolean> => {
      const running = [...byIndex.values()];
      const exited = running.map((w) => (w.process.exitCode !== null || w.process.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => w.once('exit', () => r()))));
      const before = exitCodes.length;
      stopAll();
      await Promise.all(exited);
      await o.listener.end();
      return exitCodes.slice(before).every((c) => c === 0);
    };

    for (let i = 1; i <= o.workers; i++) fork(i);
  });
}
