/**
 * The bench's child processes (the service and the baseline) and the driver talk over the
 * IPC channel of `child_process.fork`: the driver sends `{id, cmd, args}`, the child
 * answers `{id, ok, result | error}`. The child also measures itself (RSS, event-loop delay
 * and utilisation) so the figures are its own and need no HTTP endpoint.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { startFlags } from '../../src/cli/start-flags.ts';
import { PerformanceObserver, constants as perfConstants, monitorEventLoopDelay, performance, type EventLoopUtilization } from 'node:perf_hooks';

export interface ProcessStats {
  rss_mb: number;
  /** V8 heap in use and reserved, MB. */
  heap_used_mb: number;
  heap_total_mb: number;
  /** Event-loop delay since the last reset, ms. */
  eld_p50_ms: number;
  eld_p99_ms: number;
  eld_max_ms: number;
  /** Event-loop utilisation since the last reset, 0..1. */
  elu: number;
  /** HTTP requests the process has received since it started. */
  requests: number;
  /** Garbage-collector pauses since the last reset. */
  gc: GcStats;
}

/** Pauses of the main thread for one kind of garbage collection: how many, total, longest (ms). */
export interface Pauses {
  n: number;
  ms: number;
  max_ms: number;
}

/** Young-generation (scavenge) and full collections. */
export interface GcStats {
  young: Pauses;
  full: Pauses;
}

export const noGc = (): GcStats => ({ young: { n: 0, ms: 0, max_ms: 0 }, full: { n: 0, ms: 0, max_ms: 0 } });

const addPauses = (a: Pauses, b: Pauses): Pauses => ({ n: a.n + b.n, ms: a.ms + b.ms, max_ms: Math.max(a.max_ms, b.max_ms) });

/** Both kinds summed (the slices of one side). */
export const addGc = (a: GcStats, b: GcStats): GcStats => ({ young: addPauses(a.young, b.young), full: addPauses(a.full, b.full) });

const round = (p: Pauses): Pauses => ({ n: p.n, ms: Math.round(p.ms * 100) / 100, max_ms: Math.round(p.max_ms * 100) / 100 });

/** Milliseconds to two decimals (for --json). */
export const roundGc = (g: GcStats): GcStats => ({ young: round(g.young), full: round(g.full) });

/** GC pauses as the process's own PerformanceObserver sees them (`gc` entries). */
function gcRecorder(): { reset(): void; read(): GcStats } {
  let s = noGc();
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      const key = kind === perfConstants.NODE_PERFORMANCE_GC_MINOR ? 'young' : kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR ? 'full' : null;
      if (key) s[key] = addPauses(s[key], { n: 1, ms: e.duration, max_ms: e.duration });
    }
  }).observe({ entryTypes: ['gc'] });
  return {
    reset: () => void (s = noGc()),
    read: () => s,
  };
}

type Handler = (args: any) => unknown;

interface Message {
  id: number;
  cmd: string;
  args?: unknown;
}

interface Reply {
  id: number;
  ok: boolean;
  result?: unknown;
  error?: string;
}

/**
 * In a child: answer the driver's commands. `stats-reset`, `stats` and `exit` are built in.
 * `server`: the HTTP server whose requests `stats` counts.
 */
export function serveCommands(handlers: Record<string, Handler>, onExit: () => Promise<void>, server?: { on(event: 'request', fn: () => void): unknown }): void {
  if (!process.send) throw new Error('this file runs as a child of test/bench/index.ts');
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  const gc = gcRecorder();
  let elu: EventLoopUtilization = performance.eventLoopUtilization();
  let requests = 0;
  server?.on('request', () => requests++);
  const builtIn: Record<string, Handler> = {
    /** Full GC (needs --expose-gc), then the heap in use: what the process retains. */
    gc: () => {
      (globalThis as { gc?: () => void }).gc?.();
      return { heap_used_mb: Math.round(process.memoryUsage().heapUsed / 1048576), rss_mb: Math.round(process.memoryUsage.rss() / 1048576) };
    },
    'stats-reset': () => {
      delay.reset();
      gc.reset();
      elu = performance.eventLoopUtilization();
      return null;
    },
    stats: (): ProcessStats => {
      const ms = (ns: number) => Math.round(ns / 1e4) / 100;
      return {
        rss_mb: Math.round(process.memoryUsage.rss() / 1048576),
        heap_used_mb: Math.round(process.memoryUsage().heapUsed / 1048576),
        heap_total_mb: Math.round(process.memoryUsage().heapTotal / 1048576),
        eld_p50_ms: ms(delay.percentile(50)),
        eld_p99_ms: ms(delay.percentile(99)),
        eld_max_ms: ms(delay.max),
        elu: Math.round(performance.eventLoopUtilization(elu).utilization * 100) / 100,
        requests,
        gc: gc.read(),
      };
    },
  };
  let exiting = false;
  const exit = async (code: number) => {
    if (exiting) return;
    exiting = true;
    await Promise.race([onExit().catch(() => {}), new Promise((r) => setTimeout(r, 5000))]);
    // process.exit (not a signal) so that --cpu-prof writes its profile.
    process.exit(code);
  };
  process.on('message', (m: Message) => {
    if (m.cmd === 'exit') {
      process.send!({ id: m.id, ok: true, result: null } satisfies Reply, () => void exit(0));
      return;
    }
    const h = handlers[m.cmd] ?? builtIn[m.cmd];
    Promise.resolve()
      .then(() => {
        if (!h) throw new Error(`unknown command ${m.cmd}`);
        return h(m.args);
      })
      .then(
        (result) => process.send!({ id: m.id, ok: true, result: result ?? null } satisfies Reply),
        (err: unknown) => process.send!({ id: m.id, ok: false, error: err instanceof Error ? err.stack ?? err.message : String(err) } satisfies Reply),
      );
  });
  // The driver went away (crashed or killed): do not outlive it.
  process.on('disconnect', () => void exit(1));
}

export interface Child {
  readonly name: string;
  readonly proc: ChildProcess;
  call<T = unknown>(cmd: string, args?: unknown, timeoutMs?: number): Promise<T>;
  stats(): Promise<ProcessStats>;
  resetStats(): Promise<void>;
  /** Ask the child to close and exit; kill it if it has not within `timeoutMs`. */
  stop(timeoutMs?: number): Promise<void>;
}

/**
 * Fork `file` with the current Node and the flags of `npm start` (startFlags), and wait for
 * its `ready` message. `execArgv` e.g. `--cpu-prof`. The child's stderr goes to ours; stdout
 * is dropped unless `stdout` (where V8 writes its traces).
 */
export async function startChild<R>(
  name: string,
  file: string,
  opts: { env: NodeJS.ProcessEnv; execArgv?: string[]; readyTimeoutMs?: number; stdout?: boolean },
): Promise<{ child: Child; ready: R }> {
  const proc = fork(file, [], {
    env: opts.env,
    execArgv: [...process.execArgv.filter((a) => !a.startsWith('--cpu-prof')), ...startFlags(), ...(opts.execArgv ?? [])],
    stdio: ['ignore', opts.stdout ? 'inherit' : 'ignore', 'inherit', 'ipc'],
  });
  let nextId = 1;
  const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void; timer: NodeJS.Timeout }>();
  let exited = false;
  const exitPromise = new Promise<void>((resolve) => {
    proc.once('exit', (code, signal) => {
      exited = true;
      for (const p of pending.values()) {
        clearTimeout(p.timer);
        p.reject(new Error(`${name} exited (${signal ?? code})`));
      }
      pending.clear();
      resolve();
    });
  });
  const ready = new Promise<R>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within ${opts.readyTimeoutMs ?? 30000} ms`)), opts.readyTimeoutMs ?? 30000);
    proc.on('message', (m: Reply | { ready: R } | { failed: string }) => {
      if ('ready' in m) {
        clearTimeout(timer);
        resolve(m.ready);
      } else if ('failed' in m) {
        clearTimeout(timer);
        reject(new Error(`${name} failed to start: ${m.failed}`));
      } else {
        const p = pending.get(m.id);
        if (!p) return;
        pending.delete(m.id);
        clearTimeout(p.timer);
        if (m.ok) p.resolve(m.result);
        else p.reject(new Error(`${name}: ${m.error}`));
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} before it was ready`));
    });
  });
  const call = <T>(cmd: string, args?: unknown, timeoutMs = 60_000): Promise<T> => {
    if (exited || !proc.connected) return Promise.reject(new Error(`${name} has exited`));
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`${name}: ${cmd} timed out`));
      }, timeoutMs);
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      // A channel closed meanwhile (the run being stopped) fails the call, not the process.
      proc.send({ id, cmd, args } satisfies Message, (err) => {
        if (err === null || !pending.has(id)) return;
        pending.delete(id);
        clearTimeout(timer);
        reject(err);
      });
    });
  };
  const child: Child = {
    name,
    proc,
    call,
    stats: () => call<ProcessStats>('stats'),
    resetStats: () => call<void>('stats-reset'),
    async stop(timeoutMs = 10_000) {
      if (exited) return;
      await call('exit', undefined, timeoutMs).catch(() => {});
      const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
      await exitPromise;
      clearTimeout(timer);
    },
  };
  try {
    return { child, ready: await ready };
  } catch (err) {
    proc.kill('SIGKILL');
    await exitPromise;
    throw err;
  }
}

/** In a child: tell the driver we are ready (or why we are not). */
export function sendReady(value: unknown): void {
  process.send!({ ready: value });
}

export function sendFailed(err: unknown): void {
  process.send!({ failed: err instanceof Error ? err.stack ?? err.message : String(err) }, () => process.exit(1));
}
