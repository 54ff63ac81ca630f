/// <reference lib="dom" />
/**
 * The client's storage in a real browser (issue 16 §7, interface §4.8, contract §7): a
 * `File` uploaded and downloaded, list by prefix, upsert, remove, buckets. Skipped (with
 * the reason) only while the storage area is not part of this build: 404 `not found` on
 * its route.
 */
import t from 'tap';
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

async function run() {
  const [site] = await startPages(t, 1);
  const app = await startApp(t, { worker: false, env: { SITE_URL: site.origin, AUTH_RATE_LIMIT: '0' } });
  site.app = { url: app.url, anonKey: app.anonKey };
  const ctx = await launch(t);

  await t.test('buckets, then a File uploaded, listed, downloaded, replaced and removed', async (t) => {
    const page = await openPage(ctx, site.origin);
    const r = await page.evaluate(
      async ({ serviceKey, email, password }) => {
        const { createClient } = (window as W).plinth;
        const c = (window as W).client;
        const admin = createClient(c.url, serviceKey, { auth: { persistSession: false } });
        const made = await admin.storage.createBucket('files', { fileSizeLimit: 1024 });
        const pub = await admin.storage.createBucket('public-files', { public: true });
        const buckets = await c.storage.listBuckets();

        await c.auth.signUp({ email, password });
        const files = c.storage.from('files');
        const file = new File(['hello from the browser ✓'], 'hello.txt', { type: 'text/plain' });
        const up = await files.upload('docs/hello.txt', file);
        const again = await files.upload('docs/hello.txt', file);
        const replaced = await files.upload('docs/hello.txt', new Blob(['second version'], { type: 'text/plain' }), { upsert: true });
        const bytes = new TextEncoder().encode('{"a":1}');
        const buf = await files.upload('docs/data.json', bytes.buffer, { contentType: 'application/json' });
        const stream = new ReadableStream({
          start(ctrl) {
            ctrl.enqueue(new TextEncoder().encode('streamed '));
            ctrl.enqueue(new TextEncoder().encode('body'));
            ctrl.close();
          },
        });
        const streamed = await files.upload('other/stream.txt', stream, { contentType: 'text/plain' });
        const tooBig = await files.upload('docs/big.bin', new Uint8Array(2048), { contentType: 'application/octet-stream' });
        const down = await files.download('docs/hello.txt');
        const downStream = await files.download('other/stream.txt');
        const listed = await files.list({ prefix: 'docs/' });
        const all = await files.list();
        const notEmpty = await admin.storage.deleteBucket('files');
        const removed = await files.remove(['docs/hello.txt', 'docs/data.json', 'other/stream.txt']);
        const gone = await files.download('docs/hello.txt');
        const after = await files.list();
        const deleted = await admin.storage.deleteBucket('files');
        const url = c.storage.from('public-files').getPublicUrl('a b/c.txt').data.publicUrl;
        const e = (x: any) => x.error && { status: x.error.status, message: x.error.message };
        return {
          made: made.data && { id: made.data.id, limit: made.data.file_size_limit, public: made.data.public },
          pub: pub.data && pub.data.public,
          buckets: buckets.data && buckets.data.map((b: any) => b.id).sort(),
          up: up.data,
          again: e(again),
          replaced: replaced.error,
          buf: buf.error,
          streamed: streamed.error,
          tooBig: tooBig.error && tooBig.error.status,
          text: down.data && (await down.data.text()),
          type: down.data && down.data.type,
          streamText: downStream.data && (await downStream.data.text()),
          listed: listed.data && listed.data.map((o: any) => [o.name, o.size, o.mime_type]).sort(),
          all: all.data && all.data.length,
          notEmpty: e(notEmpty),
          removed: removed.data,
          gone: gone.data === null && gone.error && gone.error.status,
          after: after.data,
          deleted: deleted.error,
          url,
        };
      },
      { serviceKey: app.serviceKey, email: uniqueEmail('files'), password: PASSWORD },
    );
    t.same(r.made, { id: 'files', limit: 1024, public: false });
    t.equal(r.pub, true);
    t.same(r.buckets, ['files', 'public-files']);
    t.equal(r.up.key, 'files/docs/hello.txt');
    t.equal(r.up.path, 'docs/hello.txt');
    t.match(r.up.id, /^[0-9a-f-]{36}$/);
    t.equal(r.again?.status, 409, 'an existing path without upsert');
    t.equal(r.replaced, null, 'upsert replaces');
    t.equal(r.buf, null, 'ArrayBuffer body');
    t.equal(r.streamed, null, 'ReadableStream body');
    t.equal(r.tooBig, 413, 'over the bucket limit');
    t.equal(r.text, 'second version');
    t.match(r.type, /^text\/plain/);
    t.equal(r.streamText, 'streamed body');
    t.same(r.listed, [
      ['docs/data.json', 7, 'application/json'],
      ['docs/hello.txt', 14, 'text/plain'],
    ]);
    t.equal(r.all, 3);
    t.same(r.notEmpty, { status: 409, message: 'bucket not empty' });
    t.same(r.removed, [{ path: 'docs/hello.txt' }, { path: 'docs/data.json' }, { path: 'other/stream.txt' }]);
    t.equal(r.gone, 404, 'download of a removed object: not found');
    t.same(r.after, []);
    t.equal(r.deleted, null, 'an empty bucket is deleted');
    t.equal(r.url, `${app.url}/storage/v1/object/public-files/a%20b/c.txt`);
    await page.close();
  });

  await t.test('another user cannot read an object it does not own', async (t) => {
    const page = await openPage(ctx, site.origin);
    const r = await page.evaluate(
      async ({ serviceKey, a, b, password }) => {
        const { createClient } = (window as W).plinth;
        const url = (window as W).client.url;
        const key = (window as W).client.anonKey;
        const admin = createClient(url, serviceKey, { auth: { persistSession: false } });
        await admin.storage.createBucket('private');
        const ca = createClient(url, key, { auth: { storageKey: 'a' } });
        const cb = createClient(url, key, { auth: { storageKey: 'b' } });
        await ca.auth.signUp({ email: a, password });
        await cb.auth.signUp({ email: b, password });
        const up = await ca.storage.from('private').upload('secret.txt', new File(['mine'], 'secret.txt', { type: 'text/plain' }));
        const own = await ca.storage.from('private').download('secret.txt');
        const theirs = await cb.storage.from('private').download('secret.txt');
        const del = await cb.storage.from('private').remove('secret.txt');
        const still = await ca.storage.from('private').download('secret.txt');
        return {
          up: up.error,
          own: own.data && (await own.data.text()),
          theirs: theirs.data === null && theirs.error && theirs.error.status,
          still: still.data && (await still.data.text()),
          del: del.data,
        };
      },
      { serviceKey: app.serviceKey, a: uniqueEmail('owner'), b: uniqueEmail('other'), password: PASSWORD },
    );
    t.equal(r.up, null);
    t.equal(r.own, 'mine');
    t.ok(r.theirs && r.theirs >= 400, `refused (${r.theirs})`);
    t.equal(r.still, 'mine', 'another user could not delete it');
    await page.close();
  });

  await t.test('signed URLs, a signed upload, a transformed image and a resumable upload with progress', async (t) => {
    const page = await openPage(ctx, site.origin);
    const r = await page.evaluate(
      async ({ serviceKey, email, password }) => {
        const { createClient } = (window as W).plinth;
        const c = (window as W).client;
        const admin = createClient(c.url, serviceKey, { auth: { persistSession: false } });
        await admin.storage.createBucket('shared');
        await admin.storage.createBucket('images', { public: true });
        await c.auth.signUp({ email, password });
        const files = c.storage.from('shared');
        await files.upload('note.txt', new File(['signed hello'], 'note.txt', { type: 'text/plain' }));
        const signed = await files.createSignedUrl('note.txt', 60);
        const viaSigned = await (await fetch(signed.data.signedUrl)).text();
        const su = await files.createSignedUploadUrl('drop/by-token.txt');
        const byToken = await c.storage.from('shared').uploadToSignedUrl('drop/by-token.txt', su.data.token, new Blob(['by token'], { type: 'text/plain' }));
        const canvas = new OffscreenCanvas(300, 200);
        const g = canvas.getContext('2d')!;
        g.fillStyle = '#c33';
        g.fillRect(0, 0, 300, 200);
        await admin.storage.from('images').upload('red.png', await canvas.convertToBlob({ type: 'image/png' }));
        const small = await admin.storage.from('images').download('red.png', { transform: { width: 60, height: 60, format: 'webp' } });
        const bmp = await createImageBitmap(small.data);
        const publicUrl = c.storage.from('images').getPublicUrl('red.png', { transform: { width: 30, resize: 'contain' } }).data.publicUrl;
        const pub = await createImageBitmap(await (await fetch(publicUrl)).blob());
        const big = new Uint8Array(1_200_000).map((_, i) => i & 0xff);
        const progress: number[] = [];
        const res = await files.uploadResumable('big/r.bin', new Blob([big]), { chunkSize: 500_000, onProgress: (n: number) => progress.push(n) });
        const back = new Uint8Array(await (await files.download('big/r.bin')).data.arrayBuffer());
        // A second client whose fetch cuts the second chunk after half its bytes: it goes on from what the service kept.
        let cut = false;
        const cutting = async (input: RequestInfo | URL, init?: RequestInit) => {
          if (!cut && init?.method === 'PATCH' && Number((init.headers as Record<string, string>)['upload-offset']) > 0) {
            cut = true;
            const body = init.body as Blob;
            await (await fetch(input, { ...init, body: body.slice(0, body.size / 2) })).arrayBuffer();
            throw new TypeError('Failed to fetch');
          }
          return fetch(input, init);
        };
        const c2 = createClient(c.url, c.anonKey, { auth: { storageKey: 'cut' }, fetch: cutting });
        await c2.auth.signInWithPassword({ email, password });
        const resumed: number[] = [];
        const res2 = await c2.storage.from('shared').uploadResumable('big/cut.bin', new Blob([big]), { chunkSize: 500_000, onProgress: (n: number) => resumed.push(n) });
        const back2 = new Uint8Array(await (await files.download('big/cut.bin')).data.arrayBuffer());
        return {
          cut,
          res2,
          resumed,
          same2: back2.length === big.length && back2.every((v, i) => v === big[i]),
          viaSigned,
          byToken: byToken.data,
          small: [bmp.width, bmp.height, small.data.type],
          pub: [pub.width, pub.height],
          res,
          progress,
          same: back.length === big.length && back.every((v, i) => v === big[i]),
        };
      },
      { serviceKey: app.serviceKey, email: uniqueEmail('signed'), password: PASSWORD },
    );
    t.equal(r.viaSigned, 'signed hello', 'a signed URL read from the page');
    t.same(r.byToken, { path: 'drop/by-token.txt', fullPath: 'shared/drop/by-token.txt' }, 'uploadToSignedUrl');
    t.same(r.small, [60, 60, 'image/webp'], 'download with transform, decoded by the browser');
    t.same(r.pub, [30, 20], 'getPublicUrl with transform');
    t.same(r.res, { data: { path: 'big/r.bin' }, error: null }, 'uploadResumable');
    t.same(r.progress, [500_000, 1_000_000, 1_200_000], 'progress after each chunk');
    t.equal(r.same, true, 'the same bytes');
    t.equal(r.cut, true, 'a chunk was cut midway');
    t.same(r.res2, { data: { path: 'big/cut.bin' }, error: null }, 'the upload went on after the cut');
    t.same(r.resumed, [500_000, 750_000, 1_200_000], 'from the offset the service kept');
    t.equal(r.same2, true, 'the same bytes after the cut');
    await page.close();
  });
}
