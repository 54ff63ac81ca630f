/**
 * WORKERS: how many service processes share the port (src/core/cluster.ts), and how the
 * instance's connection budget (DB_POOL_SIZE) is split between them.
 *
 * `auto` is the cores the service may use: os.availableParallelism() (the CPUs of its
 * affinity mask), lowered by a cgroup v2 CPU quota (/sys/fs/cgroup/cpu.max, `quota period`,
 * rounded up: a container limited to 1.5 CPUs runs 2 processes).
 *
 * The budget: the instance's one LISTEN connection is the primary's (src/core/cluster-listener.ts)
 * and the job worker runs in the first process only, so an instance holds at most
 * DB_POOL_SIZE + 2 connections (docs/operations.md) whatever WORKERS is: the N processes share
 * the DB_POOL_SIZE request connections, the first ones one more when it does not divide
 * evenly. Each needs at least one: WORKERS is at most DB_POOL_SIZE (`auto` is capped there).
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

export const MAX_WORKERS = 256;

/** The cgroup v2 CPU limit in whole CPUs (rounded up), or null: none, or not readable. */
export function cgroupCpus(cpuMax: string | null = readCpuMax()): number | null {
  if (cpuMax === null) return null;
  const m = /^(\d+|max)\s+(\d+)/.exec(cpuMax.trim());
  if (!m || m[1] === 'max') return null;
  const quota = Number(m[1]);
  const period = Number(m[2]);
  if (!(quota > 0 && period > 0)) return null;
  return Math.max(1, Math.ceil(quota / period));
}

function readCpuMax(): string | null {
  try {
    return readFileSync('/sys/fs/cgroup/cpu.max', 'utf8');
  } catch {
    return null;
  }
}

/** The cores the service may use: the affinity mask's, lowered by the cgroup quota. */
export function machineCores(): number {
  const cores = availableParallelism();
  const limit = cgroupCpus();
  return Math.max(1, limit === null ? cores : Math.min(cores, limit));
}

/** The most processes DB_POOL_SIZE allows: each needs one request connection. */
export function maxWorkersFor(poolSize: number): number {
  return Math.max(1, poolSize);
}

/** WORKERS as a number of processes, or the problem with it (ConfigError's text). */
export function parseWorkers(value: string | undefined, poolSize: number, cores: () => number = machineCores): number | string {
  const most = maxWorkersFor(poolSize);
  if (value === undefined || value === '') return 1;
  if (value === 'auto') return Math.min(cores(), most, MAX_WORKERS);
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > MAX_WORKERS) return `must be auto or a whole number from 1 to ${MAX_WORKERS}`;
  const n = Number(value);
  if (n > most) return `is ${n}, more than DB_POOL_SIZE=${poolSize} allows (at most ${most}: each process holds at least one request connection); raise DB_POOL_SIZE`;
  return n;
}

/** The request connections of process `index` (1-based) of `workers`: DB_POOL_SIZE split as evenly as it goes, the first ones one more. */
export function requestShare(poolSize: number, workers: number, index: number): number {
  if (workers <= 1) return poolSize;
  return Math.floor(poolSize / workers) + (index <= poolSize % workers ? 1 : 0);
}
