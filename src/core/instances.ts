/**
 * This instance in the registry of instances (sql/fixtures/core/instances.sql): registered
 * at start (a previous run under the same name, host:port, killed and now restarted, is
 * released at once: its locked jobs unlocked), then a beat on the listener connection every
 * INSTANCE_DEAD_MS / 5 (at most every 5 s) that also declares dead every instance silent for
 * longer than INSTANCE_DEAD_MS: its jobs unlocked (they run again on a live worker), its
 * live instance row removed (the live heartbeat then removes its clients' presence). Each
 * release is one line in the log.
 */
import { hostname } from 'node:os';
import type { Listener } from './listener.ts';
import type { Logger } from './log.ts';

interface Released {
  released_id: string;
  released_name: string;
  jobs: number;
  silent_ms: string;
}

export interface RegistryOptions {
  id: string;
  /** Stable across a restart of the same instance: host:port. */
  name: string;
  listener: Listener;
  log: Logger;
  deadMs: number;
  /** The ids of this instance's graphile-worker pools (what its jobs are locked by). */
  workerIds: () => readonly string[];
}

/** The name an instance registers under: the host and the port it listens on. */
export function instanceName(port: number): string {
  return `${hostname()}:${port}`;
}

export class InstanceRegistry {
  private readonly o: RegistryOptions;
  private timer: NodeJS.Timeout | null = null;
  private beating = false;
  private stopped = false;

  constructor(o: RegistryOptions) {
    this.o = o;
  }

  /** Register (releasing a previous run under this name) and start beating. Never throws: a database away now is retried by the beat. */
  async start(): Promise<void> {
    try {
      const rows = await this.o.listener.query<Released>('select * from plinth_private.instance_start($1, $2)', [this.o.id, this.o.name]);
      for (const r of rows) {
        this.o.log.warn(
          { instance: r.released_name, instance_id: r.released_id, jobs_unlocked: r.jobs, silent_ms: Number(r.silent_ms) },
          `a previous run of this instance (${r.released_name}) did not stop cleanly: ${r.jobs} locked jobs unlocked`,
        );
      }
    } catch (err) {
      this.o.log.warn({ err }, 'instance registry: could not register yet; the heartbeat retries');
    }
    // A first beat at once: the worker's ids (it started before the registry) are known from the start, not one interval later.
    await this.beat();
    const every = Math.min(5000, Math.max(100, Math.floor(this.o.deadMs / 5)));
    this.timer = setInterval(() => void this.beat(), every);
    this.timer.unref();
  }

  async beat(): Promise<void> {
    if (this.beating || this.stopped) return;
    this.beating = true;
    try {
      const rows = await this.o.listener.query<Released>('select * from plinth_private.instance_beat($1, $2, $3::text[], $4)', [
        this.o.id,
        this.o.name,
        [...this.o.workerIds()],
        this.o.deadMs,
      ]);
      for (const r of rows) {
        this.o.log.warn(
          { instance: r.released_name, instance_id: r.released_id, jobs_unlocked: r.jobs, silent_ms: Number(r.silent_ms) },
          `instance ${r.released_name} declared dead after ${Number(r.silent_ms)} ms without a heartbeat: ${r.jobs} locked jobs unlocked`,
        );
      }
    } catch (err) {
      this.o.log.debug({ err }, 'instance registry: heartbeat failed');
    } finally {
      this.beating = false;
    }
  }

  /** Leave the registry (a clean stop: the worker has released its jobs). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.o.listener.query('select plinth_private.instance_stop($1)', [this.o.id]).catch(() => {});
  }
}
