/// <reference lib="dom" />
/**
 * Stored script on the API's origin, in a real browser: a signed-in user uploads HTML and
 * SVG that run script (one of them named `evil.png`), and the download address is opened
 * in a tab, as a victim following a link would. The script would set the document's title
 * and report to a loopback beacon with a synchronous request (so a script that ran has
 * reported before its document finished loading); neither may happen. The positive
 * control: the same files served by a page server that lets them run do both, so the
 * test can see script running.
 */
import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BrowserContext, Download, Page } from 'playwright-core';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, uniqueEmail } from '../auth/helpers.ts';
import { chromiumMissing, launch, openPage, startPages } from './browser.ts';

type W = any;

const missing = chromiumMissing();
if (missing) {
  t.plan(0, missing);
} else {
  await run();
}

interface Beacon {
  origin: string;
  hits: string[];
  /** The files as a server that lets them run would serve them: `/control/<name>` with `type`. */
  files: Map<string, { type: string; body: string }>;
}

/** Records `/hit?f=<name>` and serves the positive controls. */
async function startBeacon(): Promise<Beacon> {
  const b: Beacon = { origin: '', hits: [], files: new Map() };
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    if (u.pathname === '/hit') {
      b.hits.push(u.searchParams.get('f') ?? '');
      res.writeHead(204, { 'access-control-allow-origin': '*' }).end();
      return;
    }
    const f = b.files.get(u.pathname.replace(/^\/control\//, ''));
    if (f) res.writeHead(200, { 'content-type': f.type, 'cache-control': 'no-store' }).end(f.body);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  b.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return b;
}

/** What opening `url` in a fresh tab did: the title the page ended with, and the download if it became one. */
async function visit(ctx: BrowserContext, url: string): Promise<{ title: string; download: Download | null; status: number | null }> {
  const page: Page = await ctx.newPage();
  try {
    const download = page.waitForEvent('download', { timeout: 15_000 }).catch(() => null);
    let status: number | null = null;
    let navigated = true;
    try {
      const res = await page.goto(url, { waitUntil: 'load', timeout: 15_000 });
      status = res?.status() ?? null;
    } catch {
      navigated = false; // Chromium aborts the navigation of a download ("Download is starting").
    }
    const d = navigated ? null : await download;
    return { title: await page.title(), download: d, status };
  } finally {
    await page.close();
  }
}

async function run() {
  const [site] = await startPages(t, 1);
  // Development mode (no JWT_SECRET): an address opened in a tab needs no key, as behind a
  // proxy that adds the anon key; with a key required, a link could not reach the file at all.
  const app = await startApp(t, { worker: false, env: { JWT_SECRET: undefined, SITE_URL: site.origin, AUTH_RATE_LIMIT: '0' } });
  site.app = { url: app.url, anonKey: app.anonKey };
  const beacon = await startBeacon();
  const ctx = await launch(t);

  const script = (f: string) =>
    `document.title = 'script ran'; try { var x = new XMLHttpRequest(); x.open('GET', '${beacon.origin}/hit?f=${f}', false); x.send(); } catch (e) {}`;
  const html = (f: string) => `<!doctype html><html><head><title>inert</title></head><body><script>${script(f)}</script></body></html>`;
  const svg = (f: string) => `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><title>inert</title><script>${script(f)}</script></svg>`;
  // name in the bucket → [bytes, the type the uploader declares, the type a server that lets it run sends]
  const uploads: Record<string, [string, string, string]> = {
    'evil.png': [html('evil.png'), 'text/html', 'text/html'],
    'page.html': [html('page.html'), 'text/html', 'text/html'],
    'pic.svg': [svg('pic.svg'), 'image/svg+xml', 'image/svg+xml'],
    'sneaky.png': [svg('sneaky.png'), 'image/svg+xml', 'image/svg+xml'],
    'legacy.png': [html('legacy.png'), 'text/html', 'text/html'],
  };
  for (const [name, [body, , type]] of Object.entries(uploads)) beacon.files.set(name, { type, body });

  await t.test('the positive control: the same files run script where a server lets them', async (t) => {
    for (const name of Object.keys(uploads)) {
      const r = await visit(ctx, `${beacon.origin}/control/${name}`);
      t.equal(r.title, 'script ran', `${name}: the title was set`);
      t.ok(beacon.hits.includes(name), `${name}: the beacon was reached`);
    }
    beacon.hits.length = 0;
  });

  await t.test('uploaded through the client and opened from its public address, no script runs', async (t) => {
    const page = await openPage(ctx, site.origin);
    const up = await page.evaluate(
      async ({ serviceKey, email, password, uploads }) => {
        const { createClient } = (window as W).plinth;
        const c = (window as W).client;
        const admin = createClient(c.url, serviceKey, { auth: { persistSession: false } });
        const made = await admin.storage.createBucket('avatars', { public: true });
        await c.auth.signUp({ email, password });
        const out: Record<string, unknown> = { made: made.error };
        for (const [name, [body, type]] of Object.entries(uploads as Record<string, string[]>)) {
          const r = await c.storage.from('avatars').upload(name, new Blob([body], { type }));
          out[name] = r.error;
        }
        out.urls = Object.fromEntries(Object.keys(uploads).map((n) => [n, c.storage.from('avatars').getPublicUrl(n).data.publicUrl]));
        return out;
      },
      { serviceKey: app.serviceKey, email: uniqueEmail('stored'), password: PASSWORD, uploads },
    );
    await page.close();
    t.equal(up.made, null, 'a public bucket');
    for (const name of Object.keys(uploads)) t.equal(up[name], null, `${name} uploaded`);
    const urls = up.urls as Record<string, string>;

    // Named as images: stored as images, shown as images.
    for (const name of ['evil.png', 'sneaky.png']) {
      const r = await visit(ctx, urls[name]);
      t.equal(r.status, 200, `${name}: opened in the tab`);
      t.equal(r.download, null, `${name}: shown, not downloaded`);
      t.not(r.title, 'script ran', `${name}: the title was not set (${r.title})`);
    }
    // HTML and SVG: downloaded, never a document of the API's origin.
    for (const name of ['page.html', 'pic.svg']) {
      const r = await visit(ctx, urls[name]);
      t.ok(r.download, `${name}: a download`);
      t.equal(r.download?.suggestedFilename(), name, `${name}: under its own name`);
      t.not(r.title, 'script ran', `${name}: the title was not set`);
    }
    t.same(beacon.hits, [], 'the beacon was never reached');

    // A row stored before the type rule (HTML under a .png name, never opened before: no
    // cached copy): the download headers hold alone.
    await app.db.sql`update storage.objects set mime_type = 'text/html' where bucket_id = 'avatars' and name = 'legacy.png'`;
    const legacy = await visit(ctx, urls['legacy.png']);
    t.ok(legacy.download, 'an HTML row named .png: a download');
    t.not(legacy.title, 'script ran', 'the title was not set');
    t.same(beacon.hits, [], 'the beacon was never reached');
  });
}
