/**
 * Resumable uploads (TUS 1.0.0) with the real `tus-js-client`, on every back end: an
 * upload whose connection is cut in the middle of a chunk resumes from the offset the
 * server kept and ends byte for byte; the object exists only once the last byte is in;
 * a second writer gets 409; creation runs the upload's checks; termination removes it.
 */
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Test } from 'tap';
import * as tus from 'tus-js-client';
import { startStorageApp, until, userToken, type BackendName, type StorageApp } from './helpers.ts';

const sha = (b: Buffer | Uint8Array) => createHash('sha256').update(b).digest('hex');

/** A loopback proxy that cuts the connection carrying the `cutAt`-th byte sent to the app, once. */
async function cuttingProxy(t: Test, target: string, cutAt: number): Promise<{ url: string; cuts: () => number }> {
  const u = new URL(target);
  let sent = 0;
  let cuts = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(Number(u.port), u.hostname);
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.on('data', (d: Buffer) => {
      sent += d.length;
      if (cuts === 0 && sent >= cutAt) {
        cuts++;
        upstream.write(d.subarray(0, d.length - (sent - cutAt)), () => drop());
        return;
      }
      upstream.write(d);
    });
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, cuts: () => cuts };
}

function tusUpload(endpoint: string, token: string, apikey: string, data: Buffer, meta: Record<string, string>, extra: Partial<tus.UploadOptions> = {}) {
  const progress: number[] = [];
  const done = new Promise<string>((resolve, reject) => {
    const up = new tus.Upload(data, {
      endpoint,
      headers: { authorization: `Bearer ${token}`, apikey },
      metadata: meta,
      chunkSize: 1024 * 1024,
      retryDelays: [0, 50, 100, 200, 400],
      onProgress: (sent) => progress.push(sent),
      onError: reject,
      onSuccess: () => resolve(up.url!),
      ...extra,
    });
    up.start();
  });
  return { done, progress };
}

async function raw(app: StorageApp, method: string, path: string, headers: Record<string, string>, body?: Buffer) {
  const r = await fetch(app.url + path, { method, headers, body: body === undefined ? undefined : new Uint8Array(body) });
  const text = await r.text();
  return { status: r.status, headers: r.headers, body: text === '' ? null : JSON.parse(text) };
}

for (const backend of ['disk', 'database', 's3'] as BackendName[]) {
  t.test(`resumable uploads on the ${backend} back end`, async (t) => {
    const app = await startStorageApp(t, backend);
    const svc = app.serviceKey;
    const created = await app.call('POST', '/storage/v1/bucket', { token: svc, body: { id: 'up', file_size_limit: 8 * 1024 * 1024, allowed_mime_types: ['video/*', 'application/octet-stream'] } });
    t.equal(created.status, 201);
    const alice = await userToken();

    // 1. A 3.5 MiB upload, its connection cut in the middle of the second chunk: resumed, whole.
    const data = randomBytes(3.5 * 1024 * 1024);
    const proxy = await cuttingProxy(t, app.url, 1.5 * 1024 * 1024);
    const { done, progress } = tusUpload(`${proxy.url}/storage/v1/upload/resumable`, alice, app.anonKey, data, { bucketName: 'up', objectName: 'clips/a.mp4', contentType: 'video/mp4', cacheControl: '60' });
    await done;
    t.equal(proxy.cuts(), 1, 'the connection was cut mid-chunk');
    t.equal(progress.at(-1), data.length, 'progress reached the end');
    const back = await app.fetch('/storage/v1/object/up/clips/a.mp4', { headers: { authorization: `Bearer ${alice}` } });
    t.equal(back.status, 200);
    t.equal(back.headers.get('content-type'), 'video/mp4');
    t.equal(sha(Buffer.from(await back.arrayBuffer())), sha(data), 'the same bytes, after the resume');

    // 2. The object appears only with the last byte; HEAD tells the offset; a second writer gets 409.
    const auth = { authorization: `Bearer ${alice}`, apikey: app.anonKey, 'tus-resumable': '1.0.0' };
    const meta = (o: Record<string, string>) => Object.entries(o).map(([k, v]) => `${k} ${Buffer.from(v).toString('base64')}`).join(',');
    const small = randomBytes(300_000);
    const c = await raw(app, 'POST', '/storage/v1/upload/resumable', { ...auth, 'upload-length': String(small.length), 'upload-metadata': meta({ bucketName: 'up', objectName: 'b.bin' }) });
    t.equal(c.status, 201, 'created');
    t.equal(c.headers.get('tus-resumable'), '1.0.0');
    const loc = c.headers.get('location')!;
    t.match(loc, /^\/storage\/v1\/upload\/resumable\/[0-9a-f-]{36}$/);
    const patch = (offset: number, bytes: Buffer, headers: Record<string, string> = auth) =>
      raw(app, 'PATCH', loc, { ...headers, 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream' }, bytes);
    let r = await patch(0, small.subarray(0, 100_000));
    t.same([r.status, r.headers.get('upload-offset')], [204, '100000'], 'a first chunk');
    t.equal((await app.fetch('/storage/v1/object/up/b.bin', { headers: { authorization: `Bearer ${alice}` } })).status, 404, 'no object before the last byte');
    r = await raw(app, 'HEAD', loc, auth);
    t.same([r.status, r.headers.get('upload-offset'), r.headers.get('upload-length'), r.headers.get('cache-control')], [200, '100000', '300000', 'no-store'], 'HEAD: the offset');
    r = await patch(0, small.subarray(0, 10));
    t.same([r.status, r.body], [409, { error: 'upload offset mismatch' }], 'a stale offset: 409');
    const other = await userToken();
    r = await raw(app, 'HEAD', loc, { ...auth, authorization: `Bearer ${other}` });
    t.equal(r.status, 404, "another user cannot see alice's upload");
    // A writer holding the upload (a slow body), and a second one meanwhile.
    const slow = http.request(app.url + loc, { method: 'PATCH', headers: { ...auth, 'upload-offset': '100000', 'content-type': 'application/offset+octet-stream', 'content-length': '200000' } });
    const slowDone = new Promise<number>((resolve, reject) => slow.on('response', (res) => (res.resume(), resolve(res.statusCode!))).on('error', reject));
    slow.write(small.subarray(100_000, 150_000));
    await until(async () => (await app.db.sql`select writer from storage_private.resumable_uploads where id = ${loc.split('/').pop()!}::uuid`)[0].writer !== null, 'the first writer to hold the upload');
    const second = await patch(100_000, small.subarray(100_000, 101_000));
    t.same([second.status, second.body], [409, { error: 'upload in use by another request' }], 'a second writer: 409');
    slow.end(small.subarray(150_000));
    t.equal(await slowDone, 204, 'the first writer finishes');
    const got = await app.fetch('/storage/v1/object/up/b.bin', { headers: { authorization: `Bearer ${alice}` } });
    t.equal(sha(Buffer.from(await got.arrayBuffer())), sha(small), 'the object, with the last byte');
    t.equal((await raw(app, 'HEAD', loc, auth)).status, 404, 'the finished upload is gone');

    // 3. Creation runs the upload's checks.
    const create = (o: Record<string, string>, len: number, token = alice, extra: Record<string, string> = {}) =>
      raw(app, 'POST', '/storage/v1/upload/resumable', { ...auth, authorization: `Bearer ${token}`, 'upload-length': String(len), 'upload-metadata': meta(o), ...extra });
    t.same((await create({ bucketName: 'up', objectName: 'big.bin' }, 9 * 1024 * 1024)).body, { error: 'object exceeds the bucket file size limit' }, '413 over the limit');
    t.same((await create({ bucketName: 'up', objectName: 'x.txt', contentType: 'text/plain' }, 10)).body, { error: 'mime type not allowed' }, '415');
    t.same((await create({ bucketName: 'up', objectName: 'b.bin' }, 10)).body, { error: 'object already exists' }, '409 without x-upsert');
    t.equal((await create({ bucketName: 'up', objectName: 'b.bin' }, 10, alice, { 'x-upsert': 'true' })).status, 201, 'x-upsert');
    t.equal((await create({ bucketName: 'nope', objectName: 'b.bin' }, 10)).status, 404, 'unknown bucket');
    t.same((await create({ objectName: 'b.bin' }, 10)).body, { error: 'invalid upload metadata' });
    t.same((await create({ bucketName: 'up', objectName: '../b.bin' }, 10)).body, { error: 'invalid object path' });
    t.equal((await create({ bucketName: 'up', objectName: 'anon.bin' }, 10, app.anonKey)).status, 403, 'anon may not insert: 403 at creation');

    // 4. Termination.
    const d = await create({ bucketName: 'up', objectName: 'gone.bin' }, 1000);
    const dl = d.headers.get('location')!;
    t.equal((await raw(app, 'PATCH', dl, { ...auth, 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' }, randomBytes(500))).status, 204);
    t.equal((await raw(app, 'DELETE', dl, auth)).status, 204, 'DELETE terminates');
    t.equal((await raw(app, 'HEAD', dl, auth)).status, 404);
    const [parts] = await app.db.sql`select count(*)::int as n from storage_private.resumable_parts`;
    const [rows] = await app.db.sql`select count(*)::int as n from storage_private.resumable_uploads where name = 'gone.bin'`;
    t.same([parts.n, rows.n], [0, 0], 'nothing of it is left');
    if (backend === 'disk') t.notOk(readdirSync(join(app.root!, '.tus')).includes(dl.split('/').pop()!), 'its staged file is gone');
  });
}
