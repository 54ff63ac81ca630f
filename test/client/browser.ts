/**
 * The real-browser harness of the client tests: headless Chromium (/usr/bin/chromium,
 * driven by playwright-core) loads pages served on loopback that import the bundle
 * (`scripts/build-client.ts`, built in memory) and drive a real plinth.
 *
 * Each page server is one origin. Its `/` creates `window.client = createClient(app, anon)`
 * at load (so a redirect back to it with a session fragment is picked up) and records auth
 * events in `window.events`; `/auth/v1/*` is proxied to the service, as a deployment that
 * serves the service under SITE_URL does (the OAuth callback address is SITE_URL's).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { bundleCode } from '../../scripts/build-client.ts';

interface TapLike {
  teardown(fn: () => unknown): void;
}

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Why a browser test cannot run here (the browser `name` is not at `path`), or null. Under CI
 * (`CI` set, as `.ci/run` runs) a missing browser is a failure, never a skip: a failed install
 * must not turn the browser tests grey.
 */
export function browserMissing(name: string, path: string, pkg: string): string | null {
  if (existsSync(path)) return null;
  if (process.env.CI) throw new Error(`${name} not found at ${path}: under CI the browser tests must run`);
  return `${name} not found at ${path} (apt-get install ${pkg}; .ci/run does): browser tests skipped`;
}

/** Why the Chromium tests cannot run here, or null (see browserMissing). */
export function chromiumMissing(): string | null {
  return browserMissing('Chromium', CHROMIUM, 'chromium');
}

let code: Promise<string> | null = null;
export function bundle(): Promise<string> {
  code ??= bundleCode();
  return code;
}

export interface PageServer {
  origin: string;
  /** The service this origin's pages talk to. */
  app: { url: string; anonKey: string } | null;
  /** Extra script run after the client exists (per server). */
  script: string;
}

const PAGE = (s: PageServer) => `<!doctype html><html><head><meta charset="utf-8"><title>plinth client test</title></head><body>
<script type="module">
import * as plinth from '/client.js';
window.plinth = plinth;
window.events = [];
${s.app ? `window.client = plinth.createClient(${JSON.stringify(s.app.url)}, ${JSON.stringify(s.app.anonKey)});
window.client.auth.onAuthStateChange((event, session) => window.events.push({ event, at: Date.now(), token: session ? session.access_token : null, refresh: session ? session.refresh_token : null }));
window.clientReady = window.client.auth.ready.then(() => true);` : 'window.clientReady = Promise.resolve(true);'}
${s.script}
window.pageLoaded = true;
</script></body></html>`;

function proxy(target: string, req: http.IncomingMessage, res: http.ServerResponse): void {
  const u = new URL(req.url ?? '/', target);
  const headers = { ...req.headers, host: u.host };
  const up = http.request(u, { method: req.method, headers }, (r) => {
    res.writeHead(r.statusCode ?? 502, r.headers);
    r.pipe(res);
  });
  up.on('error', () => res.writeHead(502).end());
  req.pipe(up);
}

/** `n` page servers on loopback ports: `n` distinct origins. */
export async function startPages(t: TapLike, n: number): Promise<PageServer[]> {
  const js = await bundle();
  const out: PageServer[] = [];
  for (let i = 0; i < n; i++) {
    const s: PageServer = { origin: '', app: null, script: '' };
    const server = http.createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (path === '/client.js') {
        res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-store' }).end(js);
      } else if (path.startsWith('/auth/v1/') && s.app) {
        proxy(s.app.url, req, res);
      } else if (path === '/' || path === '/index.html' || path === '/reset-password') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(PAGE(s));
      } else {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    s.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    t.teardown(
      () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    );
    out.push(s);
  }
  return out;
}

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-quic',
  '--no-first-run',
  '--disable-component-update',
  '--disable-sync',
];

/** A fresh Chromium profile (its own user-data dir), closed at teardown. */
export async function launch(t: TapLike): Promise<BrowserContext> {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-chromium-'));
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
  });
  t.teardown(async () => {
    await ctx.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });
  return ctx;
}

/** A new tab on `origin`'s page, loaded and with its client ready. */
export async function openPage(ctx: BrowserContext, origin: string, path = '/'): Promise<Page> {
  const page = await ctx.newPage();
  page.on('pageerror', (e) => console.error(`page error (${origin}):`, e.message));
  await page.goto(origin + path);
  await waitForClient(page);
  return page;
}

export async function waitForClient(page: Page): Promise<void> {
  await page.waitForFunction(() => (window as any).pageLoaded === true, null, { timeout: 15_000 });
  await page.evaluate(() => (window as any).clientReady);
}

/** Poll `fn` in the page until it returns a truthy value; rejects after `timeoutMs`. */
export async function until<T>(page: Page, fn: () => T | Promise<T>, timeoutMs = 15_000): Promise<T> {
  const h = await page.waitForFunction(fn as () => unknown, null, { timeout: timeoutMs, polling: 50 });
  return (await h.jsonValue()) as T;
}

