/**
 * The client's signed URLs, signed uploads, image transformations and resumable uploads
 * against a real plinth, in Node: a resumable upload whose chunk is cut midway (the
 * service keeps what arrived) goes on from the offset the service reports, with progress.
 */
import t from 'tap';
import sharp from 'sharp';
import { Readable } from 'node:stream';
import { createClient } from '../../src/client/index.ts';
import { startStorageApp } from '../storage/helpers.ts';

t.test('client: signed URLs, signed uploads, transforms, resumable uploads', async (t) => {
  const app = await startStorageApp(t, 'disk');
  let cutOnce = true;
  // A fetch that cuts the second PATCH after half its bytes: the service gets half, the client an error.
  const cutting = async (input: RequestInfo | URL, init?: RequestInit) => {
    const patch = init?.method === 'PATCH' && (init.body instanceof Blob || init.body instanceof Uint8Array);
    if (patch && cutOnce && Number((init!.headers as Record<string, string>)['upload-offset']) > 0) {
      cutOnce = false;
      const body = init!.body as Blob | Uint8Array;
      const half = body instanceof Blob ? body.slice(0, Math.floor(body.size / 2)) : body.slice(0, Math.floor(body.length / 2));
      const res = await fetch(input, { ...init, body: half });
      await res.arrayBuffer();
      throw new TypeError('connection reset');
    }
    return fetch(input, init);
  };
  const admin = createClient(app.url, app.serviceKey, { auth: { persistSession: false } });
  const c = createClient(app.url, app.anonKey, { auth: { persistSession: false }, fetch: cutting });
  t.same((await admin.storage.createBucket('files')).error, null);
  t.same((await admin.storage.createBucket('pics', { public: true })).error, null);
  const files = admin.storage.from('files');
  t.same((await files.upload('a b/x.txt', 'hello', { contentType: 'text/plain' })).error, null);

  const s = await files.createSignedUrl('a b/x.txt', 60);
  t.equal(await (await fetch(s.data!.signedUrl)).text(), 'hello', 'createSignedUrl: served with no credentials');
  const many = await files.createSignedUrls(['a b/x.txt', 'none'], 60);
  t.same(many.data?.map((d) => [d.path, d.signedUrl !== null, d.error]), [['a b/x.txt', true, null], ['none', false, 'object not found']]);
  const su = await files.createSignedUploadUrl('signed/y.txt');
  const anon = createClient(app.url, app.anonKey, { auth: { persistSession: false } });
  const put = await anon.storage.from('files').uploadToSignedUrl('signed/y.txt', su.data!.token, 'by token', { contentType: 'text/plain' });
  t.same(put.data, { path: 'signed/y.txt', fullPath: 'files/signed/y.txt' }, 'uploadToSignedUrl');
  t.equal((await anon.storage.from('files').uploadToSignedUrl('signed/y.txt', su.data!.token, 'again')).error?.status, 403, 'once');

  const jpeg = await sharp({ create: { width: 400, height: 300, channels: 3, background: '#336699' } }).jpeg().toBuffer();
  t.same((await admin.storage.from('pics').upload('p.jpg', new Blob([new Uint8Array(jpeg)], { type: 'image/jpeg' }))).error, null);
  const small = await admin.storage.from('pics').download('p.jpg', { transform: { width: 40, height: 40, format: 'webp' } });
  const m = await sharp(Buffer.from(await small.data!.arrayBuffer())).metadata();
  t.same([m.width, m.height, m.format], [40, 40, 'webp'], 'download with transform');
  const pub = admin.storage.from('pics').getPublicUrl('p.jpg', { transform: { width: 100, resize: 'contain' } }).data.publicUrl;
  const pm = await sharp(Buffer.from(await (await fetch(pub)).arrayBuffer())).metadata();
  t.same([pm.width, pm.height], [100, 75], 'getPublicUrl with transform');
  const signedImg = await files.createSignedUrl('a b/x.txt', 60, { transform: { width: 10 } });
  t.match(signedImg.data?.signedUrl, /\/storage\/v1\/render\/image\/sign\/files\/a%20b\/x\.txt\?token=/);

  // resumable: sign in as a user (the anon key may not insert), a 2.5 MB file in 1 MB chunks, the second chunk cut midway
  const { error } = await c.auth.signUp({ email: `r${Date.now()}@example.com`, password: 'correct horse battery staple' });
  t.equal(error, null);
  const data = new Uint8Array(2_500_000).map((_, i) => (i * 7) & 0xff);
  const progress: number[] = [];
  let created = '';
  const r = await c.storage.from('files').uploadResumable('big/r.bin', new Blob([data]), {
    chunkSize: 1_000_000,
    onProgress: (n) => progress.push(n),
    onCreated: (u) => (created = u),
  });
  t.same(r, { data: { path: 'big/r.bin' }, error: null }, 'uploadResumable');
  t.equal(cutOnce, false, 'a chunk was cut midway');
  t.match(created, /^\/storage\/v1\/upload\/resumable\/[0-9a-f-]{36}$/);
  t.equal(progress.at(-1), data.length);
  t.ok(progress.some((p) => p % 1_000_000 !== 0 && p !== data.length), 'it went on from the offset the service kept');
  const back = await c.storage.from('files').download('big/r.bin');
  t.same(new Uint8Array(await back.data!.arrayBuffer()), data, 'the same bytes');

  // The same from streams, in pieces that straddle the chunks: a Node.js stream cut midway as above, a web ReadableStream.
  const pieces = function* () {
    for (let i = 0; i < data.length; i += 300_000) yield data.subarray(i, i + 300_000);
  };
  cutOnce = true;
  const fromNode: number[] = [];
  const rn = await c.storage.from('files').uploadResumable('big/node.bin', Readable.from(pieces()), { size: data.length, chunkSize: 1_000_000, onProgress: (n) => fromNode.push(n) });
  t.same(rn, { data: { path: 'big/node.bin' }, error: null }, 'uploadResumable from a Node.js stream');
  t.equal(cutOnce, false, 'a chunk of the stream was cut midway');
  t.ok(fromNode.some((p) => p % 1_000_000 !== 0 && p !== data.length), 'it went on from the offset the service kept, inside the chunk held');
  t.same(new Uint8Array(await (await c.storage.from('files').download('big/node.bin')).data!.arrayBuffer()), data, 'the same bytes');
  const it = pieces();
  const web = new ReadableStream<Uint8Array>({
    pull(ctrl) {
      const n = it.next();
      if (n.done) ctrl.close();
      else ctrl.enqueue(n.value);
    },
  });
  const rw = await c.storage.from('files').uploadResumable('big/web.bin', web, { size: data.length, chunkSize: 1_000_000 });
  t.same(rw, { data: { path: 'big/web.bin' }, error: null }, 'uploadResumable from a web ReadableStream');
  t.same(new Uint8Array(await (await c.storage.from('files').download('big/web.bin')).data!.arrayBuffer()), data, 'the same bytes');

  // After a "reload": the first chunk went, then the upload stopped; the same stream again from its start goes on where the service is.
  const stop = new AbortController();
  let url = '';
  const first = await c.storage.from('files').uploadResumable('big/later.bin', Readable.from(pieces()), {
    size: data.length,
    chunkSize: 1_000_000,
    signal: stop.signal,
    onCreated: (u) => (url = u),
    onProgress: () => stop.abort(),
  });
  t.ok(first.error, 'stopped after the first chunk');
  const sent: number[] = [];
  const again = await c.storage.from('files').uploadResumable('big/later.bin', Readable.from(pieces()), { size: data.length, chunkSize: 1_000_000, uploadUrl: url, onProgress: (n) => sent.push(n) });
  t.same(again, { data: { path: 'big/later.bin' }, error: null }, 'resumed from the stream given again');
  t.same(sent, [2_000_000, 2_500_000], 'only what the service did not have');
  t.same(new Uint8Array(await (await c.storage.from('files').download('big/later.bin')).data!.arrayBuffer()), data, 'the same bytes');
  const noSize = await c.storage.from('files').uploadResumable('big/x.bin', Readable.from(pieces()));
  t.equal(noSize.error?.message, 'a stream needs its length in bytes (options.size)');
});
