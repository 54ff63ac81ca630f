/**
 * Storage scenarios of resumable uploads and image transformations:
 * - `storage-resumable`: a 256 MiB upload (32 MiB with --quick) through TUS in 6 MB chunks
 *   (PATCHes one after the other, as tus-js-client sends them) against a plain POST of the
 *   same bytes, both to the disk back end of one service; ratio of MB/s (goal ≥ 0.7). The
 *   note also sends the same bytes as plain POSTs of a PATCH's size, and splits each side's
 *   CPU per MiB by thread (main, V8's helpers, file writes) with the service's full
 *   collections (its /metrics): what many requests cost, apart from the protocol.
 * - `storage-thumbnail`: a 64 px WebP thumbnail of a 2 MP JPEG, served from the variant
 *   cache to 16 concurrent clients for a few seconds; requests per second (goal ≥ 200 on
 *   two cores), the first (uncached) render's time in the note.
 *
 * Both run themselves (`custom`) as storage.ts does: a clone of the test template, one
 * service process, transfers from this process.
 */
import http from 'node:http';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import sharp from 'sharp';
import { cloneTemplate } from '../helpers/database.ts';
import { sample, scrapeMetrics } from '../helpers/metrics.ts';
import { startChild } from './ipc.ts';
import type { ServerReady } from './server.ts';
import type { CustomScenario } from './scenarios.ts';
import type { CustomResult } from './storage.ts';
import { procCpuMs } from './webhooks.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const SECRET = 'plinth-bench-storage-secret-0123456789-abcdef';
const MiB = 1024 * 1024;
const CHUNK = 6 * 1000 * 1000;
const SLICE = Buffer.alloc(MiB, 0x5a);

async function userToken(): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ role: 'authenticated', aud: 'authenticated', session_id: randomUUID(), is_anonymous: false })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(randomUUID())
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(new TextEncoder().encode(SECRET));
}

/** One request whose body is `bytes` bytes of the repeated slice; resolves with status, headers and body text. */
function send(base: string, method: string, path: string, bytes: number, headers: Record<string, string>): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers: { ...headers, 'content-length': String(bytes) } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      res.on('error', reject);
    });
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

async function withService<T>(work: (url: string, serviceKey: string, pid: number) => Promise<T>): Promise<T> {
  const db = await cloneTemplate('bench_storage_');
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-bench-storage-'));
  const { child, ready } = await startChild<ServerReady>('service-disk', join(HERE, 'server.ts'), {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      JWT_SECRET: SECRET,
      HOST: '127.0.0.1',
      PORT: '0',
      DATA_DIR: dataDir,
      STORAGE_BACKEND: 'disk',
      LOG_LEVEL: 'error',
      MIGRATE_ON_START: 'false',
      DB_POOL_SIZE: process.env.DB_POOL_SIZE ?? '10',
      DATABASE_URL: db.url,
      BENCH_WORKER: 'false',
    },
  });
  try {
    return await work(ready.url, ready.serviceRoleKey, child.proc.pid!);
  } finally {
    await child.stop().catch(() => {});
    await db.drop().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function bucket(url: string, serviceKey: string, id: string, extra: Record<string, unknown> = {}): Promise<void> {
  const res = await fetch(`${url}/storage/v1/bucket`, {
    method: 'POST',
    headers: { authorization: `Bearer ${serviceKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ id, file_size_limit: 4 * 1024 * MiB, ...extra }),
  });
  if (res.status !== 201) throw new Error(`bucket create: ${res.status} ${await res.text()}`);
}

/** Mean ms of `n` PATCHes of no bytes (after one not counted) to a new upload, one after the other. */
async function emptyPatchMs(url: string, auth: Record<string, string>, n: number): Promise<number> {
  const meta = `bucketName ${Buffer.from('bench').toString('base64')},objectName ${Buffer.from(`tus/empty-${randomUUID()}.bin`).toString('base64')}`;
  const c = await send(url, 'POST', '/storage/v1/upload/resumable', 0, { ...auth, 'tus-resumable': '1.0.0', 'upload-length': '1', 'upload-metadata': meta });
  if (c.status !== 201) throw new Error(`resumable create: ${c.status} ${c.body}`);
  const loc = String(c.headers.location);
  const headers = { ...auth, 'tus-resumable': '1.0.0', 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' };
  let ms = 0;
  for (let i = 0; i <= n; i++) {
    const t0 = performance.now();
    const p = await send(url, 'PATCH', loc, 0, headers);
    if (p.status !== 204) throw new Error(`empty patch: ${p.status} ${p.body}`);
    if (i > 0) ms += performance.now() - t0;
  }
  await send(url, 'DELETE', loc, 0, { ...auth, 'tus-resumable': '1.0.0' });
  return ms / n;
}

/** CPU ms of a process's threads so far by kind: its main thread, V8's helper threads (the garbage collector's concurrent and parallel work), libuv's pool (file writes), the rest. */
function threadCpuMs(pid: number): Record<'main' | 'v8' | 'io' | 'other', number> {
  const out = { main: 0, v8: 0, io: 0, other: 0 };
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const t of tasks) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(f[11]) + Number(f[12])) * 1000) / 100;
      const kind = t === String(pid) ? 'main' : name.startsWith('V8Worker') ? 'v8' : name.startsWith('libuv-worker') ? 'io' : 'other';
      out[kind] += ms;
    } catch {
      // the thread ended
    }
  }
  return out;
}

/** The service's garbage collector so far (/metrics, prom-client's default metrics): full collections, and ms of all pauses. */
async function gcFigures(url: string, serviceKey: string): Promise<{ major: number; ms: number }> {
  const m = await scrapeMetrics(url, serviceKey);
  const seconds = (m.get('nodejs_gc_duration_seconds_sum') ?? []).reduce((sum, s) => sum + s.value, 0);
  return { major: sample(m, 'nodejs_gc_duration_seconds_count', { kind: 'major' }), ms: seconds * 1000 };
}

export async function runResumable(quick: boolean): Promise<CustomResult> {
  const SIZE = (quick ? 32 : 256) * MiB;
  return withService(async (url, serviceKey, pid) => {
    await bucket(url, serviceKey, 'bench');
    const auth = { authorization: `Bearer ${await userToken()}` };
    let seq = 0;
    const plain = async () => {
      const t0 = performance.now();
      const r = await send(url, 'POST', `/storage/v1/object/bench/plain/${seq++}.bin`, SIZE, { ...auth, 'content-type': 'application/octet-stream' });
      if (r.status !== 200) throw new Error(`plain upload: ${r.status} ${r.body}`);
      return (performance.now() - t0) / 1000;
    };
    const resumable = async () => {
      const t0 = performance.now();
      const meta = `bucketName ${Buffer.from('bench').toString('base64')},objectName ${Buffer.from(`tus/${seq++}.bin`).toString('base64')}`;
      const c = await send(url, 'POST', '/storage/v1/upload/resumable', 0, { ...auth, 'tus-resumable': '1.0.0', 'upload-length': String(SIZE), 'upload-metadata': meta });
      if (c.status !== 201) throw new Error(`resumable create: ${c.status} ${c.body}`);
      const loc = String(c.headers.location);
      for (let off = 0; off < SIZE; off += CHUNK) {
        const n = Math.min(CHUNK, SIZE - off);
        const p = await send(url, 'PATCH', loc, n, { ...auth, 'tus-resumable': '1.0.0', 'upload-offset': String(off), 'content-type': 'application/offset+octet-stream' });
        if (p.status !== 204) throw new Error(`resumable patch: ${p.status} ${p.body}`);
      }
      return (performance.now() - t0) / 1000;
    };
    // The same bytes as plain uploads of a PATCH's size, one after the other: what the bytes
    // cost as that many requests, without the protocol (the measured cause of a MISS).
    const pieces = async () => {
      const t0 = performance.now();
      for (let off = 0; off < SIZE; off += CHUNK) {
        const n = Math.min(CHUNK, SIZE - off);
        const r = await send(url, 'POST', `/storage/v1/object/bench/pieces/${seq++}.bin`, n, { ...auth, 'content-type': 'application/octet-stream' });
        if (r.status !== 200) throw new Error(`piece upload: ${r.status} ${r.body}`);
      }
      return (performance.now() - t0) / 1000;
    };
    const run = { plain, resumable, pieces };
    type Side = keyof typeof run;
    const SIDES: Side[] = ['plain', 'resumable', 'pieces'];
    for (const side of SIDES) await run[side](); // warm-up
    const rounds = quick ? 1 : 3;
    const total = { plain: 0, resumable: 0, pieces: 0 };
    // The service's CPU per MiB on each side: on a shared machine (and disk) the rates move
    // with the neighbours, the CPU per byte much less. And its garbage collector's work
    // (/metrics): full collections and the time of all of them.
    const cpuMs = { plain: 0, resumable: 0, pieces: 0 };
    const gc = { plain: { major: 0, ms: 0 }, resumable: { major: 0, ms: 0 }, pieces: { major: 0, ms: 0 } };
    const threads = { plain: { main: 0, v8: 0, io: 0, other: 0 }, resumable: { main: 0, v8: 0, io: 0, other: 0 }, pieces: { main: 0, v8: 0, io: 0, other: 0 } };
    const timed = async (side: Side) => {
      const g0 = await gcFigures(url, serviceKey);
      const c0 = procCpuMs(pid);
      const t0 = threadCpuMs(pid);
      total[side] += await run[side]();
      cpuMs[side] += procCpuMs(pid) - c0;
      const t1 = threadCpuMs(pid);
      for (const k of ['main', 'v8', 'io', 'other'] as const) threads[side][k] += t1[k] - t0[k];
      const g1 = await gcFigures(url, serviceKey);
      gc[side].major += g1.major - g0.major;
      gc[side].ms += g1.ms - g0.ms;
    };
    for (let i = 0; i < rounds; i++) {
      for (const side of i % 2 === 0 ? SIDES : [...SIDES].reverse()) await timed(side);
    }
    const mib = (rounds * SIZE) / MiB;
    const cpuPerMiB = (side: Side) => cpuMs[side] / mib;
    const mbps = (s: number) => mib / s;
    const rate = { plain: mbps(total.plain), resumable: mbps(total.resumable), pieces: mbps(total.pieces) };
    const gcLine = (side: Side) =>
      `${((gc[side].major * 100) / mib).toFixed(0)} full collections per 100 MiB, CPU per MiB: main thread ${(threads[side].main / mib).toFixed(1)} ms ` +
      `(GC pauses ${(gc[side].ms / mib).toFixed(1)}), V8's helper threads ${(threads[side].v8 / mib).toFixed(1)}, file writes ${(threads[side].io / mib).toFixed(1)}`;
    // The measured cause of a MISS: the fixed cost of a PATCH (headers, credential, the
    // lease taken and given back: two transactions), from PATCHes of no bytes, times the
    // PATCHes of an upload; and the ratio the bytes alone would have.
    const patches = Math.ceil(SIZE / CHUNK);
    const nEmpty = quick ? 10 : 30;
    const cEmpty = procCpuMs(pid);
    const emptyMs = await emptyPatchMs(url, auth, nEmpty);
    // The service's CPU per PATCH of no bytes (its creation and DELETE included): the fixed
    // part of the CPU per MiB below.
    const emptyCpuMs = (procCpuMs(pid) - cEmpty) / (nEmpty + 3);
    const fixedS = (patches * emptyMs) / 1000;
    const perUpload = total.resumable / rounds;
    const bytesOnly = SIZE / MiB / Math.max(1e-6, perUpload - fixedS);
    return {
      rps: rate.resumable,
      baseline_rps: rate.plain,
      rss_mb: null,
      note:
        `MB/s; ${SIZE / MiB} MiB in ${CHUNK / 1e6} MB chunks: resumable ${rate.resumable.toFixed(0)}, plain upload ${rate.plain.toFixed(0)} (ratio ${(rate.resumable / rate.plain).toFixed(2)}); ` +
        `a PATCH of no bytes takes ${emptyMs.toFixed(1)} ms (credential, lease taken and given back), ${patches} PATCHes ${((fixedS / perUpload) * 100).toFixed(0)} % of an upload's ` +
        `${(perUpload * 1000).toFixed(0)} ms: the bytes alone ${bytesOnly.toFixed(0)} MB/s (ratio ${(bytesOnly / rate.plain).toFixed(2)}); ` +
        `service CPU per MiB: resumable ${cpuPerMiB('resumable').toFixed(1)} ms, plain ${cpuPerMiB('plain').toFixed(1)} ms, ` +
        `of which ${((emptyCpuMs * patches) / (SIZE / MiB)).toFixed(1)} ms the PATCHes' fixed part (${emptyCpuMs.toFixed(1)} ms of CPU per PATCH of no bytes); ` +
        `the same bytes as ${patches} plain uploads of ${CHUNK / 1e6} MB: ${rate.pieces.toFixed(0)} MB/s (resumable / these ${(rate.resumable / rate.pieces).toFixed(2)}), ` +
        `${cpuPerMiB('pieces').toFixed(1)} ms of CPU per MiB; garbage collector: one upload ${gcLine('plain')}; ${CHUNK / 1e6} MB uploads ${gcLine('pieces')}; resumable ${gcLine('resumable')}`,
      extra: {
        unit: 'MB/s',
        object_mib: SIZE / MiB,
        chunk_bytes: CHUNK,
        resumable_mbps: Math.round(rate.resumable),
        plain_mbps: Math.round(rate.plain),
        empty_patch_ms: Math.round(emptyMs * 10) / 10,
        empty_patch_cpu_ms: Math.round(emptyCpuMs * 10) / 10,
        bytes_only_mbps: Math.round(bytesOnly),
        pieces_mbps: Math.round(rate.pieces),
        cpu_ms_per_mib: { resumable: Math.round(cpuPerMiB('resumable') * 10) / 10, plain: Math.round(cpuPerMiB('plain') * 10) / 10, pieces: Math.round(cpuPerMiB('pieces') * 10) / 10 },
        full_gc_per_100_mib: Object.fromEntries(SIDES.map((side) => [side, Math.round((gc[side].major * 100) / mib)])),
        gc_ms_per_mib: Object.fromEntries(SIDES.map((side) => [side, Math.round((gc[side].ms / mib) * 100) / 100])),
        thread_cpu_ms_per_mib: Object.fromEntries(SIDES.map((side) => [side, Object.fromEntries(Object.entries(threads[side]).map(([k, v]) => [k, Math.round((v / mib) * 10) / 10]))])),
      },
    };
  });
}

export async function runThumbnail(quick: boolean): Promise<CustomResult> {
  return withService(async (url, serviceKey) => {
    await bucket(url, serviceKey, 'pics', { public: true });
    // 2 MP of noise-free gradient, as a camera JPEG would be in size order.
    const w = 1732;
    const h = 1155;
    const raw = Buffer.alloc(w * h * 3);
    for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) raw.set([x & 0xff, y & 0xff, (x ^ y) & 0xff], (y * w + x) * 3);
    const jpeg = await sharp(raw, { raw: { width: w, height: h, channels: 3 } }).jpeg({ quality: 85 }).toBuffer();
    const up = await fetch(`${url}/storage/v1/object/pics/photo.jpg`, { method: 'POST', headers: { authorization: `Bearer ${serviceKey}`, 'content-type': 'image/jpeg' }, body: new Uint8Array(jpeg) });
    if (up.status !== 200) throw new Error(`upload: ${up.status} ${await up.text()}`);
    const path = `${url}/storage/v1/render/image/public/pics/photo.jpg?width=64&height=64&format=webp`;
    const t0 = performance.now();
    const first = await fetch(path);
    const firstMs = performance.now() - t0;
    const meta = await sharp(Buffer.from(await first.arrayBuffer())).metadata();
    if (first.status !== 200 || meta.format !== 'webp' || meta.width !== 64) throw new Error(`render: ${first.status} ${meta.format} ${meta.width}`);
    const seconds = quick ? 1.5 : 8;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
    const get = () =>
      new Promise<number>((resolve, reject) => {
        http.get(path, { agent }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        }).on('error', reject);
      });
    let done = 0;
    const end = performance.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (performance.now() < end) {
          if ((await get()) !== 200) throw new Error('thumbnail: not 200');
          done++;
        }
      }),
    );
    agent.destroy();
    const rps = done / seconds;
    return {
      rps,
      baseline_rps: 0,
      rss_mb: null,
      note: `64 px WebP of a ${w}x${h} JPEG (${(jpeg.length / 1024).toFixed(0)} KiB) from the cache, 16 clients: ${rps.toFixed(0)}/s; first render ${firstMs.toFixed(0)} ms`,
      extra: { first_render_ms: Math.round(firstMs), source_kib: Math.round(jpeg.length / 1024) },
    };
  });
}

export const STORAGE_EXTRA_SCENARIOS: CustomScenario[] = [
  {
    name: 'storage-resumable',
    what: 'TUS upload of 256 MiB in 6 MB chunks, disk back end',
    target: { kind: 'ratio', min: 0.7 },
    baselineLabel: 'a plain POST of the same bytes to the same service',
    run: (c) => runResumable(c.quick),
  },
  {
    name: 'storage-thumbnail',
    what: '64 px WebP thumbnail of a 2 MP JPEG, from the variant cache, 16 clients',
    target: { kind: 'rps', min: 200 },
    baselineLabel: 'none (requests per second; first render time in the note)',
    run: (c) => runThumbnail(c.quick),
  },
];
