/**
 * Storage scenarios (issue 13): `storage-upload` and `storage-download` of a 64 MiB object
 * (32 MiB with --quick)
 * on the disk and database back ends, in MB/s against a bare fastify route that streams the
 * same bytes to and from a file (storage-baseline.ts, the limit); and the memory figure:
 * how much the service's RSS grows while one 1 GiB object (64 MiB with --quick) goes up
 * and comes back down on each back end (goal: < 64 MiB).
 *
 * Byte streams do not fit the request-rate harness, so these scenarios run themselves
 * (`custom`): their own database (a clone of the test template), one service process per
 * back end, their own baseline process, transfers one at a time from this process,
 * alternating baseline and service. The ratio reported is the disk back end's; the
 * database back end's figures are in `extra` (and the note).
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

const HERE = fileURLToPath(new URL('.', import.meta.url));
const SECRET = 'plinth-bench-storage-secret-0123456789-abcdef';
const MiB = 1024 * 1024;
const BACKENDS = ['disk', 'database'] as const;
type BackendName = (typeof BACKENDS)[number];

export interface CustomResult {
  rps: number;
  baseline_rps: number;
  rss_mb: number | null;
  note: string;
  extra: Record<string, unknown>;
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

export async function runStorageScenario(kind: 'upload' | 'download', quick: boolean): Promise<CustomResult> {
  // --quick keeps the whole bench short: 32 MiB transfers and a 64 MiB memory figure.
  const OBJECT = (quick ? 32 : 64) * MiB;
  const db = await cloneTemplate('bench_storage_');
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-bench-storage-'));
  const children: Child[] = [];
  try {
    const baseEnv = (backend: BackendName): NodeJS.ProcessEnv => ({
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      JWT_SECRET: SECRET,
      HOST: '127.0.0.1',
      PORT: '0',
      DATA_DIR: join(dataDir, backend),
      STORAGE_BACKEND: backend,
      LOG_LEVEL: 'error',
      MIGRATE_ON_START: 'false',
      DB_POOL_SIZE: process.env.DB_POOL_SIZE ?? '10',
      DATABASE_URL: db.url,
      BENCH_WORKER: 'false',
    });
    const [base, ...services] = await Promise.all([
      startChild<{ url: string }>('storage-baseline', join(HERE, 'storage-baseline.ts'), { env: { PATH: process.env.PATH } }),
      ...BACKENDS.map((b) => startChild<ServerReady>(`service-${b}`, join(HERE, 'server.ts'), { env: baseEnv(b), execArgv: ['--expose-gc'] })),
    ]);
    children.push(base.child, ...services.map((s) => s.child));
    const svc = Object.fromEntries(BACKENDS.map((b, i) => [b, services[i]])) as Record<BackendName, (typeof services)[number]>;
    const user = { authorization: `Bearer ${await mintUserToken(SECRET)}` };
    for (const b of BACKENDS) {
      const res = await fetch(`${svc[b].ready.url}/storage/v1/bucket`, {
        method: 'POST',
        headers: { authorization: `Bearer ${svc[b].ready.serviceRoleKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ id: `bench-${b}`, file_size_limit: 4 * 1024 * MiB }),
      });
      if (res.status !== 201) throw new Error(`bucket create on ${b}: ${res.status} ${await res.text()}`);
    }

    const rounds = quick ? 2 : 3;
    const perSlice = 1;
    let seq = 0;
    const sideBaseline = async (): Promise<{ bytes: number; seconds: number }> => {
      let seconds = 0;
      for (let i = 0; i < perSlice; i++) {
        if (kind === 'upload') {
          const r = await upload(base.ready.url, `/upload/u${seq++}`, OBJECT, {});
          if (r.status !== 200) throw new Error(`baseline upload: ${r.status}`);
          seconds += r.seconds;
        } else {
          const r = await download(base.ready.url, '/download/obj', {});
          if (r.status !== 200 || r.bytes !== OBJECT) throw new Error(`baseline download: ${r.status} ${r.bytes}`);
          seconds += r.seconds;
        }
      }
      return { bytes: perSlice * OBJECT, seconds };
    };
    const sideService = async (b: BackendName): Promise<{ bytes: number; seconds: number }> => {
      let seconds = 0;
      for (let i = 0; i < perSlice; i++) {
        if (kind === 'upload') {
          const r = await upload(svc[b].ready.url, `/storage/v1/object/bench-${b}/up/${seq++}.bin`, OBJECT, user);
          if (r.status !== 200) throw new Error(`${b} upload: ${r.status} ${r.body.slice(0, 200)}`);
          seconds += r.seconds;
        } else {
          const r = await download(svc[b].ready.url, `/storage/v1/object/bench-${b}/obj.bin`, user);
          if (r.status !== 200 || r.bytes !== OBJECT) throw new Error(`${b} download: ${r.status} ${r.bytes}`);
          seconds += r.seconds;
        }
      }
      return { bytes: perSlice * OBJECT, seconds };
    };
    if (kind === 'download') {
      await base.child.call('seed', { name: 'obj', bytes: OBJECT });
      for (const b of BACKENDS) {
        const r = await upload(svc[b].ready.url, `/storage/v1/object/bench-${b}/obj.bin`, OBJECT, user);
        if (r.status !== 200) throw new Error(`${b} seed upload: ${r.status} ${r.body}`);
      }
    }
    // Warm-up, not measured.
    await sideBaseline();
    for (const b of BACKENDS) await sideService(b);

    const total = { baseline: { bytes: 0, seconds: 0 }, disk: { bytes: 0, seconds: 0 }, database: { bytes: 0, seconds: 0 } };
    for (let round = 0; round < rounds; round++) {
      const order: Array<'baseline' | BackendName> = round % 2 === 0 ? ['baseline', 'disk', 'database'] : ['database', 'disk', 'baseline'];
      for (const side of order) {
        const r = side === 'baseline' ? await sideBaseline() : await sideService(side);
        total[side].bytes += r.bytes;
        total[side].seconds += r.seconds;
      }
    }
    const rate = {
      baseline: mbps(total.baseline.bytes, total.baseline.seconds),
      disk: mbps(total.disk.bytes, total.disk.seconds),
      database: mbps(total.database.bytes, total.database.seconds),
    };
    const extra: Record<string, unknown> = {
      unit: 'MB/s (MiB per second), one transfer at a time',
      object_mib: OBJECT / MiB,
      baseline_mbps: round1(rate.baseline),
      disk_mbps: round1(rate.disk),
      disk_ratio: round3(rate.disk / rate.baseline),
      database_mbps: round1(rate.database),
      database_ratio: round3(rate.database / rate.baseline),
    };
    let note = `MB/s; disk ${rate.disk.toFixed(0)} (ratio ${(rate.disk / rate.baseline).toFixed(2)}), database ${rate.database.toFixed(0)} (ratio ${(rate.database / rate.baseline).toFixed(2)}), baseline ${rate.baseline.toFixed(0)}`;
    let rssMax: number | null = null;

    if (kind === 'download') {
      // The memory figure: one big object up and down on each back end.
      const big = quick ? 64 * MiB : 1024 * MiB;
      const memory: Record<string, { upload_rss_growth_mb: number; download_rss_growth_mb: number }> = {};
      for (const b of BACKENDS) {
        const path = `/storage/v1/object/bench-${b}/big.bin`;
        const up = await rssGrowth(svc[b].child, async () => {
          const r = await upload(svc[b].ready.url, path, big, user);
          if (r.status !== 200) throw new Error(`${b} big upload: ${r.status} ${r.body.slice(0, 200)}`);
        });
        const down = await rssGrowth(svc[b].child, async () => {
          const r = await download(svc[b].ready.url, path, user);
          if (r.status !== 200 || r.bytes !== big) throw new Error(`${b} big download: ${r.status} ${r.bytes}`);
        });
        memory[b] = { upload_rss_growth_mb: up, download_rss_growth_mb: down };
        rssMax = Math.max(rssMax ?? 0, (await svc[b].child.stats()).rss_mb);
      }
      extra.memory = { object_mib: big / MiB, goal_mb: 64, ...memory };
      note += `; RSS growth for ${big / MiB} MiB up/down: ${BACKENDS.map((b) => `${b} ${memory[b].upload_rss_growth_mb}/${memory[b].download_rss_growth_mb} MB`).join(', ')} (goal < 64)`;
    }
    return { rps: rate.disk, baseline_rps: rate.baseline, rss_mb: rssMax, note, extra };
  } finally {
    await Promise.all(children.map((c) => c.stop().catch(() => {})));
    await db.drop().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const round1 = (n: number) => Math.round(n * 10) / 10;
const round3 = (n: number) => Math.round(n * 1000) / 1000;

/** The scenario entries for scenarios.ts (their `service`/`baseline` traffic is unused). */
export const STORAGE_SCENARIOS: CustomScenario[] = [
  {
    name: 'storage-upload',
    what: 'POST a 64 MiB object (binary body) as a user, disk back end (database in the note)',
    target: { kind: 'ratio', min: 0.7 },
    baselineLabel: 'bare fastify route streaming the body to a file',
    run: (c) => runStorageScenario('upload', c.quick),
  },
  {
    name: 'storage-download',
    what: 'GET a 64 MiB object as a user, disk back end (database in the note); RSS for 1 GiB up/down',
    target: { kind: 'ratio', min: 0.7 },
    baselineLabel: 'bare fastify route streaming a file',
    run: (c) => runStorageScenario('download', c.quick),
  },
];
