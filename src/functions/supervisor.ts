/**
 * The bundled edge runtime's supervisor (docs/api/functions.md): when EDGE_RUNTIME_URL is
 * unset and FUNCTIONS_DIR exists, the service runs Deno from the `deno` npm package (a
 * dependency) as a child process serving FUNCTIONS_DIR (runtime/server.ts), on a loopback
 * port of its own.
 *
 * - Permissions are narrowed to what functions need: network (less the database, the
 *   service's own ports and link-local addresses, net.ts), read of FUNCTIONS_DIR, and the
 *   variables named in FUNCTIONS_ENV (no other environment reaches the child either).
 *   No write, run, ffi or sys access; no config file, lock file or prompt.
 * - Each start draws a random secret, written as the first line of the child's stdin (not
 *   in its arguments or environment, which functions could read); the runtime answers only
 *   calls that carry it in `x-plinth-runtime-secret`, since its loopback port is open to
 *   every local process.
 * - If the child dies it is started again with backoff (0.25 s doubling to 10 s; back to
 *   0.25 s after a minute of good health). Meanwhile `url` is null and calls get 502.
 * - `stop()` ends it with the service (SIGTERM, SIGKILL after 2 s). The child also exits
 *   by itself when its stdin closes, so a service killed hard leaves no runtime behind.
 * - Its stdout and stderr go to the service log; the runtime writes a function's stack
 *   there (one JSON line), never into a response.
 * - Budgets (RuntimePool runs one such process per function, so one function's incident
 *   is its own): the V8 heap is capped at FUNCTIONS_MEMORY_MB (`--max-old-space-size`;
 *   over it V8 ends the process), and its resident memory is watched too (off-heap
 *   buffers) with a margin for Deno itself; the runtime beats on stdout every 100 ms, and
 *   a process whose beat stops for the CPU budget (FUNCTIONS_TIMEOUT_MS, at least 1 s: a
 *   function that holds the event loop, an endless loop) is killed. A process that dies
 *   after serving is started again at once (the backoff applies only to one that dies
 *   straight after its start, a crash loop).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../core/log.ts';

const SERVER = fileURLToPath(new URL('./runtime/server.ts', import.meta.url));
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 10_000;
const HEALTHY_AFTER_MS = 60_000;
const START_TIMEOUT_MS = 30_000;
/** How often the watchdog looks at a child's beat and memory. */
const WATCH_EVERY_MS = 100;
/** Resident memory allowed beyond the heap budget: Deno's own (its code, the compiler cache) and buffers. */
const RSS_MARGIN_MB = 192;
/** A child that dies this long after it listened was not in a crash loop: it is replaced at once. */
const CRASH_LOOP_MS = 1000;
/** The line the runtime writes every 100 ms while its event loop turns (runtime/server.ts). */
const BEAT = '.';
const OUT_OF_MEMORY = /out of memory|heap limit/i;

/** The Deno executable the `deno` npm package installed for this platform, or an Error saying why not. */
export function denoExecutable(): string | Error {
  try {
    const require = createRequire(import.meta.url);
    const api = require('deno/install_api.cjs') as { runInstall(): string };
    return api.runInstall();
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

export interface SupervisorOptions {
  functionsDir: string;
  /** Variables the functions may read (FUNCTIONS_ENV), with their values (null: unset). */
  env: Readonly<Record<string, string | null>>;
  /** Deno's module cache (DENO_DIR). */
  cacheDir: string;
  /** Deno's `--allow-net` / `--deny-net` flags (net.ts). */
  net: readonly string[];
  log: Logger;
  /** FUNCTIONS_MEMORY_MB: the V8 heap cap (and, with a margin, the resident memory cap); null: none. */
  memoryMb?: number | null;
  /** The CPU budget: a child whose beat stops this long is killed; null: no watchdog. */
  cpuMs?: number | null;
  /** The function this process serves (logged with its incidents). */
  name?: string;
}

export class DenoSupervisor {
  /** `http://127.0.0.1:<port>` while the runtime is up; null while it is down or starting. */
  url: string | null = null;
  /** The secret of the running child (null while none runs): sent in `x-plinth-runtime-secret`. */
  secret: string | null = null;
  private child: ChildProcess | null = null;
  private stopping = false;
  private backoff = BACKOFF_MIN_MS;
  private restartTimer: NodeJS.Timeout | null = null;
  private waiters: Array<() => void> = [];
  private readonly opts: SupervisorOptions;
  private readonly exe: string;
  /** Starts so far (1 after the first). */
  starts = 0;
  /** true once the runtime has been up: from then on, a call while it is down gets 502 at once. */
  wasUp = false;

  constructor(exe: string, opts: SupervisorOptions) {
    this.exe = exe;
    this.opts = opts;
  }

  /** The very first start is under way (calls wait for it; later, a runtime that is down means 502). */
  get firstStart(): boolean {
    return !this.wasUp && this.starts === 1 && this.child !== null;
  }

  /** The child's process id while it runs. */
  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  start(): void {
    if (this.stopping || this.child !== null) return;
    const { functionsDir, env, cacheDir, net, log } = this.opts;
    mkdirSync(cacheDir, { recursive: true });
    const names = Object.keys(env);
    const args = [
      'run',
      '--quiet',
      '--no-prompt',
      '--no-config',
      '--no-lock',
      // req.signal aborts when the caller goes away, not also after every answer (and no
      // warning about the legacy behaviour on the first request).
      '--unstable-no-legacy-abort',
      ...(this.opts.memoryMb ? [`--v8-flags=--max-old-space-size=${this.opts.memoryMb}`] : []),
      ...net,
      `--allow-read=${functionsDir}`,
      ...(names.length > 0 ? [`--allow-env=${names.join(',')}`] : []),
      SERVER,
      functionsDir,
    ];
    const childEnv: Record<string, string> = { DENO_DIR: cacheDir, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' };
    for (const [k, v] of Object.entries(env)) if (v !== null) childEnv[k] = v;
    const startedAt = Date.now();
    this.starts++;
    const child = spawn(this.exe, args, { cwd: functionsDir, env: childEnv, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    const secret = randomBytes(32).toString('base64url');
    child.stdin.write(secret + '\n');
    const startTimer = setTimeout(() => {
      if (this.url === null && this.child === child) {
        log.error({ functionsDir }, 'edge runtime did not start in time; restarting');
        child.kill('SIGKILL');
      }
    }, START_TIMEOUT_MS);
    startTimer.unref();

    let lastBeat = Date.now();
    let listenedAt = 0;
    let killedFor: string | null = null;
    const watchdog = setInterval(() => {
      if (this.child !== child || listenedAt === 0 || killedFor !== null) return;
      const { cpuMs, memoryMb, name } = this.opts;
      if (cpuMs && Date.now() - lastBeat > cpuMs) killedFor = 'cpu';
      else if (memoryMb && child.pid !== undefined && rssMb(child.pid) > memoryMb + RSS_MARGIN_MB) killedFor = 'memory';
      if (killedFor === null) return;
      log.error({ function: name, pid: child.pid, budget: killedFor, cpu_ms: cpuMs, memory_mb: memoryMb }, 'edge function over its budget; its process is ended and replaced');
      child.kill('SIGKILL');
    }, WATCH_EVERY_MS);
    watchdog.unref();

    // V8 ends a process over its heap cap itself, saying so on stdout or stderr.
    const outOfMemory = () => {
      if (killedFor === null) log.error({ function: this.opts.name, pid: child.pid, budget: 'memory', memory_mb: this.opts.memoryMb }, 'edge function over its budget; its process is ended and replaced');
      killedFor = 'memory';
    };
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line === BEAT) {
        lastBeat = Date.now();
        return;
      }
      if (OUT_OF_MEMORY.test(line)) return outOfMemory();
      if (this.url === null && this.child === child && line.startsWith('{"plinth_edge_listening":')) {
        lastBeat = listenedAt = Date.now();
        const port = (JSON.parse(line) as { plinth_edge_listening: number }).plinth_edge_listening;
        this.url = `http://127.0.0.1:${port}`;
        this.secret = secret;
        this.wasUp = true;
        clearTimeout(startTimer);
        log.info({ url: this.url, pid: child.pid, function: this.opts.name, functionsDir }, 'edge runtime listening');
        for (const w of this.waiters.splice(0)) w();
        return;
      }
      log.info({ edge_runtime: 'stdout' }, line);
    });
    createInterface({ input: child.stderr }).on('line', (line) => {
      const entry = line.startsWith('{') ? parseLine(line) : null;
      if (entry !== null && entry.level === 'error') {
        log.error({ function: entry.function, stack: entry.stack }, typeof entry.msg === 'string' ? entry.msg : 'edge function error');
      } else if (OUT_OF_MEMORY.test(line)) {
        outOfMemory();
      } else {
        log.warn({ edge_runtime: 'stderr' }, line);
      }
    });
    child.stdin.on('error', () => {});
    const gone = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(startTimer);
      clearInterval(watchdog);
      if (this.child !== child) return;
      this.child = null;
      this.url = null;
      this.secret = null;
      for (const w of this.waiters.splice(0)) w();
      if (this.stopping) return;
      if (Date.now() - startedAt > HEALTHY_AFTER_MS) this.backoff = BACKOFF_MIN_MS;
      // Served a while, then died (a budget, a crash): replaced at once. A crash loop backs off.
      const delay = listenedAt !== 0 && Date.now() - listenedAt > CRASH_LOOP_MS ? 0 : this.backoff;
      if (delay !== 0) this.backoff = Math.min(this.backoff * 2, BACKOFF_MAX_MS);
      log.error({ code, signal, function: this.opts.name, budget: killedFor ?? undefined, restart_in_ms: delay }, 'edge runtime exited; restarting');
      this.restartTimer = setTimeout(() => {
        this.restartTimer = null;
        this.start();
      }, delay);
      this.restartTimer.unref();
    };
    child.on('exit', gone);
    child.on('error', (err) => {
      log.error({ err }, 'edge runtime could not be started');
      // A spawn that failed emits no 'exit'.
      if (child.pid === undefined) gone(null, null);
    });
  }

  /** Resolves with the URL once the runtime is up, or null after `timeoutMs`. */
  ready(timeoutMs: number): Promise<string | null> {
    if (this.url !== null || this.stopping) return Promise.resolve(this.url);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        resolve(this.url);
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== done);
        resolve(this.url);
      }, timeoutMs);
      this.waiters.push(done);
    });
  }

  /** Stop the runtime and do not restart it. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    for (const w of this.waiters.splice(0)) w();
    const child = this.child;
    if (child === null || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 2000);
    await exited;
    clearTimeout(timer);
    this.child = null;
    this.url = null;
    this.secret = null;
  }
}

/** Resident memory of a process in MB (Linux /proc); 0 where it cannot be read. */
function rssMb(pid: number): number {
  try {
    const pages = Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]);
    return (pages * 4096) / 1048576;
  } catch {
    return 0;
  }
}

/**
 * One runtime process per function (started on its first call, then kept): an endless loop
 * or a memory bomb in one function ends only that function's process, while calls to the
 * others go on. Each process serves FUNCTIONS_DIR as before, with its own secret.
 */
export class RuntimePool {
  readonly members = new Map<string, DenoSupervisor>();
  private stopped = false;
  private readonly exe: string;
  private readonly opts: SupervisorOptions;

  constructor(exe: string, opts: SupervisorOptions) {
    this.exe = exe;
    this.opts = opts;
  }

  /** The process of function `name`, started if it was not. */
  member(name: string): DenoSupervisor {
    let sup = this.members.get(name);
    if (sup === undefined) {
      sup = new DenoSupervisor(this.exe, { ...this.opts, name });
      this.members.set(name, sup);
      if (!this.stopped) sup.start();
    }
    return sup;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.members.values()].map((m) => m.stop()));
  }
}

interface RuntimeLogLine {
  level?: unknown;
  function?: unknown;
  msg?: unknown;
  stack?: unknown;
}

function parseLine(line: string): RuntimeLogLine | null {
  try {
    const v: unknown = JSON.parse(line);
    return typeof v === 'object' && v !== null ? v : null;
  } catch {
    return null;
  }
}

/** DENO_DIR for the bundled runtime: under DATA_DIR, so nothing is written outside it. */
export function denoCacheDir(dataDir: string): string {
  return join(dataDir, 'deno');
}
