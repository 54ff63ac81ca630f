/**
 * Storage scenarios: `storage-upload` and `storage-download` of a 64 MiB object (32 MiB with
 * --quick) on the disk back end (goal ≥ 0.9), `storage-upload-database` and
 * `storage-download-database` on the database back end (goal ≥ 0.7), in MB/s against a bare
 * fastify route that streams the same bytes to and from a file (storage-baseline.ts, the
 * limit). The download rows carry the memory figure too: how much the service's RSS grows
 * while one 1 GiB object (32 MiB with --quick) goes up and comes back down (goal < 64 MiB;
 * a row whose ratio passes but whose growth does not is a MISS).
 *
 * The database rows also measure PostgreSQL alone moving the same bytes the same way
 * (storage-postgres.ts): the limit of that back end, printed beside the ratio.
 *
 * Byte streams do not fit the request-rate harness, so these scenarios run themselves
 * (`custom`): their own database (a clone of the test template), one service process, their
 * own baseline process, transfers one at a time from this process, alternating baseline and
 * service.
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cloneTemplate } from '../helpers/database.ts';
import { startChild, type Child } from './ipc.ts';
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import type { ServerReady } from './server.ts';
import type { CustomScenario } from './scenarios.ts';
import { postgresSide, type PostgresSide } from './storage-postgres.ts';
import { cpuNow, cpuSince, type Cpu } from './webhooks.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const SECRET = 'plinth-bench-storage-secret-0123456789-abcdef';
const MiB = 1024 * 1024;
type BackendName = 'disk' | 'database';
/** RSS growth allowed for the 1 GiB object up and down. */
const MEMORY_GOAL_MB = 64;

export interface CustomResult {
  rps: number;
  baseline_rps: number;
  rss_mb: number | null;
  note: string;
  extra: Record<string, unknown>;
  /** The scenario's own verdict where the ratio cannot say (the memory goal missed). */
  status?: 'MISS';
}

const SLICE = Buffer.alloc(MiB, 0x5a);

/** POST `bytes` bytes (a repeated 1 MiB slice, written with backpressure); resolves with status and seconds. */
function upload(base: string, path: string, bytes: number, headers: Record<string, string>): Promise<{ status: number; seconds: number; body: string }> {
  const u = new URL(base);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, method: 'POST', path, agent: false, headers: { ...headers, 'content-length': String(bytes), 'content-type': 'application/octet-stream' } },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, seconds: (performance.now() - t0) / 1000, body }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    let left = bytes;
    const pump = () => {
      while (left > 0) {
        const n = Math.min(left, MiB);
        left -= n;
        if (!req.write(n === MiB ? SLICE : SLICE.subarray(0, n))) return void req.once('drain', pump);
      }
      req.end();
    };
    pump();
  });
}

/** GET and discard; resolves with status, bytes and seconds. */
function download(base: string, path: string, headers: Record<string, string>): Promise<{ status: number; bytes: number; seconds: number }> {
  const u = new URL(base);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method: 'GET', path, agent: false, headers }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => resolve({ status: res.statusCode!, bytes, seconds: (performance.now() - t0) / 1000 }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Run `work` while sampling the child's RSS every 50 ms; the growth over its RSS after a full GC before. */
async function rssGrowth(child: Child, work: () => Promise<void>): Promise<number> {
  const before = (await child.call<{ rss_mb: number }>('gc')).rss_mb;
  let peak = before;
  let running = true;
  const sampler = (async () => {
    while (running) {
      peak = Math.max(peak, (await child.stats()).rss_mb);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    await work();
  } finally {
    running = false;
    await sampler;
  }
  peak = Math.max(peak, (await child.stats()).rss_mb);
  return peak - before;
}

/** An authenticated user's access token (as scenarios.ts mints them; not imported, to keep the import graph acyclic). */
async function mintUserToken(secret: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ role: 'authenticated', aud: 'authenticated', session_id: randomUUID(), is_anonymous: false })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(randomUUID())
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(new TextEncoder().encode(secret));
}

const mbps = (bytes: number, seconds: number) => bytes / MiB / seconds;

export async function runStorageScenario(kind: 'upload' | 'download', backend: BackendName, quick: boolean, goal = 0.7): Promise<CustomResult> {
  // --quick keeps the whole bench short: 32 MiB transfers, one round, and a 32 MiB memory
  // figure (16 MiB transfers were too short: the fixed cost of a request set the ratio).
  const OBJECT = (quick ? 32 : 64) * MiB;
  const db = await cloneTemplate('bench_storage_');
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-bench-storage-'));
  const children: Child[] = [];
  let pg: PostgresSide | null = null;
  try {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      JWT_SECRET: SECRET,
      HOST: '127.0.0.1',
      PORT: '0',
      DATA_DIR: dataDir,
      STORAGE_BACKEND: backend,
      LOG_LEVEL: 'error',
      MIGRATE_ON_START: 'false',
      DB_POOL_SIZE: process.env.DB_POOL_SIZE ?? '10',
      DATABASE_URL: db.url,
      BENCH_WORKER: 'false',
    };
    const [base, svc] = await Promise.all([
      startChild<{ url: string }>('storage-baseline', join(HERE, 'storage-baseline.ts'), { env: { PATH: process.env.PATH } }),
      startChild<ServerReady>(`service-${backend}`, join(HERE, 'server.ts'), { env, execArgv: ['--expose-gc'] }),
    ]);
    children.push(base.child, svc.child);
    const user = { authorization: `Bearer ${await mintUserToken(SECRET)}` };
    const bucket = `bench-${backend}`;
    const res = await fetch(`${svc.ready.url}/storage/v1/bucket`, {
      method: 'POST',
      headers: { authorization: `Bearer ${svc.ready.serviceRoleKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: bucket, file_size_limit: 4 * 1024 * MiB }),
    });
    if (res.status !== 201) throw new Error(`bucket create on ${backend}: ${res.status} ${await res.text()}`);

    const rounds = quick ? 1 : 3;
    let seq = 0;
    const sideBaseline = async (): Promise<number> => {
      if (kind === 'upload') {
        const r = await upload(base.ready.url, `/upload/u${seq++}`, OBJECT, {});
        if (r.status !== 200) throw new Error(`baseline upload: ${r.status}`);
        return r.seconds;
      }
      const r = await download(base.ready.url, '/download/obj', {});
      if (r.status !== 200 || r.bytes !== OBJECT) throw new Error(`baseline download: ${r.status} ${r.bytes}`);
      return r.seconds;
    };
    const sideService = async (): Promise<number> => {
      if (kind === 'upload') {
        const r = await upload(svc.ready.url, `/storage/v1/object/${bucket}/up/${seq++}.bin`, OBJECT, user);
        if (r.status !== 200) throw new Error(`${backend} upload: ${r.status} ${r.body.slice(0, 200)}`);
        return r.seconds;
      }
      const r = await download(svc.ready.url, `/storage/v1/object/${bucket}/obj.bin`, user);
      if (r.status !== 200 || r.bytes !== OBJECT) throw new Error(`${backend} download: ${r.status} ${r.bytes}`);
      return r.seconds;
    };
    if (kind === 'download') {
      await base.child.call('seed', { name: 'obj', bytes: OBJECT });
      const r = await upload(svc.ready.url, `/storage/v1/object/${bucket}/obj.bin`, OBJECT, user);
      if (r.status !== 200) throw new Error(`${backend} seed upload: ${r.status} ${r.body}`);
    }
    // The database back end's limit: PostgreSQL alone, the same bytes, the same COPY.
    let objectId = '';
    if (backend === 'database') {
      pg = await postgresSide(db.url);
      if (kind === 'download') {
        const [row] = await pg.sql<{ id: string }[]>`select o.id from storage.objects o where o.bucket_id = ${bucket} and o.name = 'obj.bin'`;
        objectId = row.id;
      }
    }
    const sidePostgres = (): Promise<number> => (kind === 'upload' ? pg!.upload(OBJECT, SLICE) : pg!.download(objectId, OBJECT));
    type Side = 'baseline' | 'service' | 'postgres';
    const sides: Side[] = pg ? ['baseline', 'service', 'postgres'] : ['baseline', 'service'];
    const run = (side: Side) => (side === 'baseline' ? sideBaseline() : side === 'service' ? sideService() : sidePostgres());
    // Warm-up, not measured.
    for (const side of sides) await run(side);

    const seconds = { baseline: 0, service: 0, postgres: 0 };
    // CPU of each process while each side runs (ms): the service, the bare stream's process
    // (the `receiver` of cpuNow), the database's backends and this process (the client).
    const zero = (): Cpu => ({ driver: 0, receiver: 0, service: 0, postgres: 0 });
    const cpu: Record<Side, Cpu> = { baseline: zero(), service: zero(), postgres: zero() };
    for (let round = 0; round < rounds; round++) {
      // Each side goes first in turn.
      const order = sides.map((_, i) => sides[(i + round) % sides.length]);
      for (const side of order) {
        const c0 = cpuNow(db.name, base.child.proc.pid!);
        seconds[side] += await run(side);
        const used = cpuSince(c0, cpuNow(db.name, base.child.proc.pid!));
        for (const k of ['driver', 'receiver', 'service', 'postgres'] as const) cpu[side][k] += used[k];
      }
    }
    /** ms of CPU per MiB moved. */
    const perMiB = (ms: number) => ms / ((rounds * OBJECT) / MiB);
    const rate = { baseline: mbps(rounds * OBJECT, seconds.baseline), service: mbps(rounds * OBJECT, seconds.service) };
    const ratio = rate.service / rate.baseline;
    const extra: Record<string, unknown> = {
      unit: 'MB/s (MiB per second), one transfer at a time',
      backend,
      object_mib: OBJECT / MiB,
      baseline_mbps: round1(rate.baseline),
      service_mbps: round1(rate.service),
      ratio: round3(ratio),
    };
    let note = `MB/s; ${backend} ${rate.service.toFixed(0)}, bare stream ${rate.baseline.toFixed(0)} (ratio ${ratio.toFixed(2)})`;
    if (pg) {
      const limit = mbps(rounds * OBJECT, seconds.postgres);
      extra.postgres_mbps = round1(limit);
      extra.ratio_to_postgres = round3(rate.service / limit);
      note += `; PostgreSQL alone (the same binary COPY from one connection) ${limit.toFixed(0)}, ${(limit / rate.baseline).toFixed(2)} of the bare stream: plinth ${(rate.service / limit).toFixed(2)} of it`;
      // The measured cause: CPU per MiB of each process, for each side.
      const c = { service: cpu.service, baseline: cpu.baseline, postgres: cpu.postgres };
      const split = {
        service_ms_per_mib: round1(perMiB(c.service.service)),
        service_postgres_ms_per_mib: round1(perMiB(c.service.postgres)),
        client_ms_per_mib: round1(perMiB(c.service.driver)),
        bare_stream_ms_per_mib: round1(perMiB(c.baseline.receiver)),
        bare_client_ms_per_mib: round1(perMiB(c.baseline.driver)),
        alone_postgres_ms_per_mib: round1(perMiB(c.postgres.postgres)),
        alone_client_ms_per_mib: round1(perMiB(c.postgres.driver)),
      };
      extra.cpu = split;
      note +=
        `; CPU ms per MiB: plinth ${split.service_ms_per_mib} + its PostgreSQL ${split.service_postgres_ms_per_mib} (+ client ${split.client_ms_per_mib}), ` +
        `bare stream ${split.bare_stream_ms_per_mib} (+ client ${split.bare_client_ms_per_mib}), PostgreSQL alone ${split.alone_postgres_ms_per_mib} (+ its client ${split.alone_client_ms_per_mib})`;
      // Below the goal with PostgreSQL alone below it too, that is the cause: the service
      // cannot send the bytes faster than the database returns them.
      if (ratio < goal && limit / rate.baseline < goal) {
        note += `; cause: PostgreSQL alone returns these bytes at ${(limit / rate.baseline).toFixed(2)} of the bare stream, below the goal ${goal}, and plinth moves ${(rate.service / limit).toFixed(2)} of that`;
      } else if (ratio < goal && split.service_ms_per_mib > 0) {
        // Otherwise the service's own CPU per MiB: on one core it caps what the service moves.
        note +=
          `; cause: the service spends ${split.service_ms_per_mib} ms of CPU per MiB (one core: at most ${(1000 / split.service_ms_per_mib).toFixed(0)} MB/s), ` +
          `the bare stream ${split.bare_stream_ms_per_mib} ms` +
          (kind === 'download' ? `: the rest is receiving the chunks from PostgreSQL (the client of PostgreSQL alone spends ${split.alone_client_ms_per_mib} ms on that)` : '');
      }
    }
    let status: 'MISS' | undefined;

    if (kind === 'download') {
      // The memory figure: one big object up and down.
      const big = quick ? 32 * MiB : 1024 * MiB;
      const path = `/storage/v1/object/${bucket}/big.bin`;
      const up = await rssGrowth(svc.child, async () => {
        const r = await upload(svc.ready.url, path, big, user);
        if (r.status !== 200) throw new Error(`${backend} big upload: ${r.status} ${r.body.slice(0, 200)}`);
      });
      const down = await rssGrowth(svc.child, async () => {
        const r = await download(svc.ready.url, path, user);
        if (r.status !== 200 || r.bytes !== big) throw new Error(`${backend} big download: ${r.status} ${r.bytes}`);
      });
      extra.memory = { object_mib: big / MiB, goal_mb: MEMORY_GOAL_MB, upload_rss_growth_mb: up, download_rss_growth_mb: down };
      note += `; RSS growth for ${big / MiB} MiB up/down: ${up}/${down} MB (goal < ${MEMORY_GOAL_MB})`;
      if (Math.max(up, down) >= MEMORY_GOAL_MB) status = 'MISS';
    }
    const rssMb = (await svc.child.stats()).rss_mb;
    return { rps: rate.service, baseline_rps: rate.baseline, rss_mb: rssMb, note, extra, ...(status ? { status } : {}) };
  } finally {
    await pg?.close().catch(() => {});
    await Promise.all(children.map((c) => c.stop().catch(() => {})));
    await db.drop().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const round1 = (n: number) => Math.round(n * 10) / 10;
const round3 = (n: number) => Math.round(n * 1000) / 1000;

/** The scenario entries for scenarios.ts (their `service`/`baseline` traffic is unused). */
export const STORAGE_SCENARIOS: CustomScenario[] = (
  [
    ['upload', 'disk', 0.9],
    ['download', 'disk', 0.9],
    ['upload', 'database', 0.7],
    ['download', 'database', 0.7],
  ] as const
).map(([kind, backend, min]) => ({
  name: backend === 'disk' ? `storage-${kind}` : `storage-${kind}-${backend}`,
  what:
    kind === 'upload'
      ? `POST a 64 MiB object (binary body) as a user, ${backend} back end`
      : `GET a 64 MiB object as a user, ${backend} back end; RSS growth for 1 GiB up/down`,
  target: { kind: 'ratio', min },
  baselineLabel: kind === 'upload' ? 'bare fastify route streaming the body to a file' : 'bare fastify route streaming a file',
  run: (c) => runStorageScenario(kind, backend, c.quick, min),
}));
