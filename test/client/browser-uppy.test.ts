/// <reference lib="dom" />
/**
 * Uppy (`@uppy/core` with `@uppy/tus`), unchanged, in headless Chromium against
 * `/storage/v1/upload/resumable`, configured as Supabase documents it (the metadata
 * `bucketName`, `objectName`, `contentType`, `cacheControl`; a user's token; the page on
 * another origin): a file of several chunks arrives whole, with progress, and a second
 * upload of the same path without `x-upsert` is refused with 409.
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { build } from 'esbuild';
import { startStorageApp, userToken } from '../storage/helpers.ts';
import { chromiumMissing, launch } from './browser.ts';

type W = any;

const missing = chromiumMissing();
if (missing) {
  t.plan(0, missing);
} else {
  await run();
}

async function run() {
  await t.test('Uppy with its Tus plugin uploads through /storage/v1/upload/resumable', uppyUpload);
}

async function uppyUpload(t: Test) {
  // Uppy bundled for the browser, as an application would ship it.
  const js = (
    await build({
      stdin: { contents: "export { default as Uppy } from '@uppy/core'; export { default as Tus } from '@uppy/tus';", resolveDir: process.cwd(), loader: 'js' },
      bundle: true,
      format: 'esm',
      platform: 'browser',
      write: false,
      logLevel: 'silent',
    })
  ).outputFiles[0].text;
  const page = `<!doctype html><html><head><meta charset="utf-8"><title>uppy</title></head><body><script type="module">
import { Uppy, Tus } from '/uppy.js';
window.Uppy = Uppy; window.Tus = Tus; window.loaded = true;
</script></body></html>`;
  const server = http.createServer((req, res) => {
    if (req.url === '/uppy.js') res.writeHead(200, { 'content-type': 'text/javascript' }).end(js);
    else res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const app = await startStorageApp(t, 'disk', { ALLOWED_ORIGINS: origin });
  const bucket = await app.call('POST', '/storage/v1/bucket', { token: app.serviceKey, body: { id: 'uploads' } });
  t.equal(bucket.status, 201);

  const ctx = await launch(t);
  const tab = await ctx.newPage();
  tab.on('pageerror', (e) => console.error('page error:', e.message));
  await tab.goto(origin);
  await tab.waitForFunction(() => (window as W).loaded === true);

  const token = await userToken();
  const size = 2_500_000;
  const upload = (name: string) =>
    tab.evaluate(
      async ({ endpoint, anonKey, token, name, size }) => {
        const { Uppy, Tus } = window as W;
        const uppy = new Uppy({ autoProceed: false });
        uppy.use(Tus, {
          endpoint,
          headers: { authorization: `Bearer ${token}`, apikey: anonKey },
          chunkSize: 1_000_000,
          retryDelays: [0],
          removeFingerprintOnSuccess: true,
          allowedMetaFields: ['bucketName', 'objectName', 'contentType', 'cacheControl'],
        });
        const progress: number[] = [];
        uppy.on('upload-progress', (_f: unknown, p: { bytesUploaded: number }) => progress.push(p.bytesUploaded));
        const bytes = new Uint8Array(size).map((_, i) => (i * 13) & 0xff);
        uppy.addFile({
          name: 'data.bin',
          type: 'application/octet-stream',
          data: new Blob([bytes], { type: 'application/octet-stream' }),
          meta: { bucketName: 'uploads', objectName: name, contentType: 'application/octet-stream', cacheControl: '3600' },
        });
        const result = await uppy.upload();
        return {
          successful: result.successful.length,
          failed: result.failed.map((f: { error?: string; response?: { status?: number } }) => String(f.error)),
          progress: progress.at(-1) ?? 0,
        };
      },
      { endpoint: `${app.url}/storage/v1/upload/resumable`, anonKey: app.anonKey, token, name, size },
    );

  const first = await upload('uppy/data.bin');
  t.same(first, { successful: 1, failed: [], progress: size }, 'uploaded whole, with progress');
  const back = await app.fetch('/storage/v1/object/uploads/uppy/data.bin', { headers: { authorization: `Bearer ${token}` } });
  t.equal(back.status, 200);
  const got = new Uint8Array(await back.arrayBuffer());
  t.equal(got.length, size);
  t.ok(got.every((b, i) => b === ((i * 13) & 0xff)), 'the same bytes');
  t.equal(back.headers.get('cache-control'), 'private, max-age=3600', 'cacheControl from the metadata');

  const again = await upload('uppy/data.bin');
  t.equal(again.successful, 0);
  t.match(again.failed[0], /409/, 'the same path again without x-upsert: 409');
}
