/**
 * Helpers for the storage tests: the app started on one back end (for s3, a real
 * S3-compatible server, s3rver, on a loopback port with its files in a temporary folder),
 * user tokens minted with the test secret, and raw HTTP requests whose request line is
 * sent exactly as written (fetch would normalise `..` away).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import S3rver from 's3rver';
import type { Logger } from '../../src/core/log.ts';
import { TEST_JWT_SECRET, startApp, type TestApp } from '../helpers/app.ts';

export type BackendName = 'database' | 'disk' | 's3';

interface TapLike {
  teardown(fn: () => unknown): void;
}

export interface StorageApp extends TestApp {
  backend: BackendName;
  /** The folder every byte of the disk or s3 back end lands in (null for database). */
  root: string | null;
  /** A folder that holds `root`: nothing may be written here outside of it. */
  parent: string | null;
}

export async function startS3(t: TapLike): Promise<{ endpoint: string; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-s3rver-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir, configureBuckets: [{ name: 'plinth-test' }] });
  const addr = (await server.run()) as { port: number };
  t.teardown(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { endpoint: `http://127.0.0.1:${addr.port}`, dir };
}

export async function startStorageApp(t: TapLike, backend: BackendName, env: Record<string, string> = {}, opts: { log?: Logger } = {}): Promise<StorageApp> {
  const parent = mkdtempSync(join(tmpdir(), 'plinth-storage-'));
  t.teardown(() => rmSync(parent, { recursive: true, force: true }));
  let root: string | null = null;
  const extra: Record<string, string> = { STORAGE_BACKEND: backend };
  if (backend === 'disk') {
    root = join(parent, 'files');
    extra.STORAGE_DIR = root;
  } else if (backend === 's3') {
    const s3 = await startS3(t);
    root = s3.dir;
    Object.assign(extra, {
      S3_ENDPOINT: s3.endpoint,
      S3_BUCKET: 'plinth-test',
      S3_REGION: 'us-east-1',
      S3_ACCESS_KEY_ID: 'S3RVER',
      S3_SECRET_ACCESS_KEY: 'S3RVER',
      S3_FORCE_PATH_STYLE: 'true',
      STORAGE_DIR: join(parent, 'unused'),
    });
  } else {
    extra.STORAGE_DIR = join(parent, 'unused');
  }
  const app = await startApp(t, { env: { ...extra, ...env }, log: opts.log });
  return Object.assign(app, { backend, root, parent: backend === 'disk' ? parent : null });
}

export async function userToken(sub: string = randomUUID()): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ role: 'authenticated', aud: 'authenticated', email: `${sub}@example.com`, session_id: randomUUID(), is_anonymous: false })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(sub)
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(new TextEncoder().encode(TEST_JWT_SECRET));
}

export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  json(): any;
}

/** One request with the path sent byte for byte as given. */
export function raw(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: Buffer | string): Promise<RawResponse> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const b = Buffer.concat(chunks);
        resolve({ status: res.statusCode!, headers: res.headers, body: b, json: () => JSON.parse(b.toString('utf8')) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Every file (relative path) under `dir`, recursively. */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string, rel: string) => {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      return;
    }
    for (const n of names) {
      const p = join(d, n);
      const r = rel ? `${rel}/${n}` : n;
      if (statSync(p).isDirectory()) walk(p, r);
      else out.push(r);
    }
  };
  walk(dir, '');
  return out.sort();
}

/** Wait for `cond` with a deadline (no fixed sleeps). */
export async function until(cond: () => boolean | Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
