/**
 * The storage suite, run once per back end (database.test.ts, disk.test.ts, s3.test.ts):
 * every row of interface §4.8 and contract §7 over real HTTP, the path validation of every
 * verb, streaming limits, interrupted and concurrent uploads.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { Test } from 'tap';
import { filesUnder, raw, startStorageApp, until, userToken, type BackendName, type StorageApp } from './helpers.ts';

type T = Test;

function sha256(b: Buffer | Uint8Array): string {
  return createHash('sha256').update(b).digest('hex');
}

/** A response read to its end (an unread body would keep its connection busy). */
async function settled(r: Response) {
  const buf = Buffer.from(await r.arrayBuffer());
  return {
    status: r.status,
    headers: r.headers,
    text: async () => buf.toString('utf8'),
    json: async () => JSON.parse(buf.toString('utf8')),
    arrayBuffer: async () => buf,
  };
}

async function setup(t: T, backend: BackendName) {
  const app = await startStorageApp(t, backend);
  const aliceId = randomUUID();
  const bobId = randomUUID();
  const alice = await userToken(aliceId);
  const bob = await userToken(bobId);
  const svc = app.serviceKey;
  const mkBucket = async (body: Record<string, unknown>) => {
    const r = await app.call('POST', '/storage/v1/bucket', { token: svc, body });
    if (r.status !== 201) throw new Error(`bucket create: ${r.status} ${r.text}`);
    return r.body;
  };
  const put = (path: string, token: string | null, body: Buffer | string, headers: Record<string, string> = {}) =>
    app
      .fetch(`/storage/v1/object/${path}`, {
        method: 'POST',
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
        // A string goes as bytes: fetch would add text/plain for it.
        body: new Uint8Array(typeof body === 'string' ? Buffer.from(body) : body),
      })
      .then(settled);
  const get = (path: string, token: string | null, headers: Record<string, string> = {}) =>
    app.fetch(`/storage/v1/object/${path}`, { headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers } }).then(settled);
  return { app, aliceId, bobId, alice, bob, svc, mkBucket, put, get };
}

/** Chunks left in the database back end (0 for the others, which never write any). */
async function chunkCount(app: StorageApp): Promise<number> {
  const [r] = await app.db.sql`select count(*)::int as n from storage_private.chunks`;
  return r.n as number;
}

async function objectRows(app: StorageApp, bucket: string): Promise<{ name: string; id: string }[]> {
  return (await app.db.sql`select name, id::text from storage.objects where bucket_id = ${bucket} order by name`) as any;
}

/** The files of the back end, without the s3rver's own metadata files. */
function storedFiles(app: StorageApp): string[] {
  if (app.root === null) return [];
  return filesUnder(app.root).filter((f) => !f.endsWith('._S3rver_metadata.json'));
}

export function storageSuite(t: T, backend: BackendName): void {
  t.test('buckets: create, list, delete (§4.8, §2.4)', async (t) => {
    const { app, svc, alice, mkBucket, put } = await setup(t, backend);
    let r = await app.call('POST', '/storage/v1/bucket', { body: { name: 'nokey' } });
    t.equal(r.status, 401, 'no credential: 401');
    t.same(r.body, { error: 'missing credentials' });
    r = await app.call('POST', '/storage/v1/bucket', { token: app.anonKey, body: { name: 'x' } });
    t.equal(r.status, 403, 'anon key: 403');
    r = await app.call('POST', '/storage/v1/bucket', { token: alice, body: { name: 'x' } });
    t.equal(r.status, 403, 'user token: 403');

    r = await app.call('POST', '/storage/v1/bucket', { token: svc, body: { name: 'avatars' } });
    t.equal(r.status, 201);
    t.equal(r.body.id, 'avatars', 'id from name');
    t.equal(r.body.public, false);
    t.equal(r.body.file_size_limit, 52428800, 'default limit');
    t.equal(r.body.allowed_mime_types, null);
    t.match(r.body.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);

    r = await app.call('POST', '/storage/v1/bucket', {
      token: svc,
      body: { id: 'docs', name: 'ignored', public: true, file_size_limit: 1000, allowed_mime_types: ['text/plain'] },
    });
    t.equal(r.status, 201);
    t.equal(r.body.id, 'docs', 'id wins over name');
    t.equal(r.body.public, true);
    t.equal(r.body.file_size_limit, 1000);
    t.same(r.body.allowed_mime_types, ['text/plain']);

    r = await app.call('POST', '/storage/v1/bucket', { token: svc, body: { id: 'docs' } });
    t.equal(r.status, 409, 'existing id: 409');
    t.same(r.body, { error: 'bucket already exists' });

    for (const body of [{}, { id: 5 }, { id: 'q', public: 'yes' }, { id: 'q', file_size_limit: -1 }, { id: 'q', file_size_limit: 1.5 }, { id: 'q', allowed_mime_types: 'text/plain' }]) {
      r = await app.call('POST', '/storage/v1/bucket', { token: svc, body });
      t.equal(r.status, 400, `bad body ${JSON.stringify(body)}: 400`);
      t.same(r.body, { error: 'invalid request body' });
    }
    for (const id of ['..', '.tmp', 'a/b', 'a\\b', 'C:', 'a\u0000b', '']) {
      r = await app.call('POST', '/storage/v1/bucket', { token: svc, body: { id } });
      t.equal(r.status, 400, `bad id ${JSON.stringify(id)}: 400`);
    }

    r = await app.call('GET', '/storage/v1/bucket', { token: app.anonKey });
    t.equal(r.status, 200);
    t.same(r.body.map((b: { id: string }) => b.id), ['avatars', 'docs'], 'anon lists buckets');

    t.equal((await put('docs/a.txt', alice, 'hello', { 'content-type': 'text/plain' })).status, 200);
    r = await app.call('DELETE', '/storage/v1/bucket/docs', { token: svc });
    t.equal(r.status, 409);
    t.same(r.body, { error: 'bucket not empty' });
    r = await app.call('DELETE', '/storage/v1/bucket/avatars', { token: app.anonKey });
    t.equal(r.status, 403, 'bucket delete needs service_role');
    r = await app.call('DELETE', '/storage/v1/bucket/avatars', { token: svc });
    t.equal(r.status, 200);
    t.same(r.body, { message: 'bucket deleted' });
    r = await app.call('DELETE', '/storage/v1/bucket/avatars', { token: svc });
    t.equal(r.status, 404);
    t.same(r.body, { error: 'bucket not found' });
    r = await app.call('GET', '/storage/v1/bucket', { token: svc });
    t.same(r.body.map((b: { id: string }) => b.id), ['docs']);
    void mkBucket;
  });

  t.test('objects: upload, download, list, delete under the default policies (§4.8, contract §7)', async (t) => {
    const { app, alice, bob, aliceId, svc, mkBucket, put, get } = await setup(t, backend);
    await mkBucket({ id: 'private' });
    await mkBucket({ id: 'public', public: true });

    let res = await put('private/a/1.txt', alice, 'one', { 'content-type': 'text/plain; charset=utf-8' });
    t.equal(res.status, 200);
    const up = (await res.json()) as any;
    t.match(up.id, /^[0-9a-f-]{36}$/);
    t.equal(up.key, 'private/a/1.txt');
    const [row] = await app.db.sql`select owner::text, size, mime_type from storage.objects where id = ${up.id}`;
    t.equal(row.owner, aliceId, 'the uploader owns it');
    t.equal(Number(row.size), 3);

    res = await put('private/x.txt', app.anonKey, 'nope', { 'content-type': 'text/plain' });
    t.equal(res.status, 403, 'anon may not create objects');
    t.same(await res.json(), { error: 'permission denied' });
    res = await put('nobucket/x.txt', alice, 'x');
    t.equal(res.status, 404);
    t.same(await res.json(), { error: 'bucket not found' });
    res = await settled(await app.fetch('/storage/v1/object/private/y.txt', { method: 'POST', body: 'x' }));
    t.equal(res.status, 401, 'no credential');

    res = await get('private/a/1.txt', alice);
    t.equal(res.status, 200);
    t.equal(await res.text(), 'one');
    t.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8', 'stored Content-Type');
    t.equal(res.headers.get('cache-control'), 'private, no-cache');
    t.ok(res.headers.get('etag'), 'ETag');
    res = await get('private/a/1.txt', bob);
    t.equal(res.status, 404, 'another user does not see it');
    t.same(await res.json(), { error: 'object not found' });
    res = await get('private/a/1.txt', app.anonKey);
    t.equal(res.status, 404, 'anon does not see it');
    res = await get('private/a/1.txt', svc);
    t.equal(res.status, 200, 'service role sees everything');
    await res.arrayBuffer();
    res = await get('private/nothing.txt', alice);
    t.equal(res.status, 404);
    res = await get('nobucket/a.txt', alice);
    t.equal(res.status, 404);
    t.same(await res.json(), { error: 'bucket not found' });

    res = await put('public/p.txt', bob, 'pub', { 'content-type': 'text/plain' });
    t.equal(res.status, 200);
    res = await get('public/p.txt', app.anonKey);
    t.equal(res.status, 200, 'anyone reads a public bucket');
    t.equal(await res.text(), 'pub');
    t.equal(res.headers.get('cache-control'), 'public, max-age=3600');
    res = await get('public/p.txt', alice);
    t.equal(res.status, 200);
    await res.arrayBuffer();

    // 409 without x-upsert, replace with it
    res = await put('private/a/1.txt', alice, 'two');
    t.equal(res.status, 409);
    t.same(await res.json(), { error: 'object already exists' });
    res = await put('private/a/1.txt', bob, 'bob', { 'x-upsert': 'true' });
    t.equal(res.status, 409, "another user cannot replace what it cannot see");
    res = await put('private/a/1.txt', alice, 'two!', { 'x-upsert': 'true', 'content-type': 'text/markdown' });
    t.equal(res.status, 200, 'x-upsert: true replaces');
    const up2 = (await res.json()) as any;
    t.not(up2.id, up.id, 'a replaced object is a new version');
    res = await get('private/a/1.txt', alice);
    t.equal(await res.text(), 'two!');
    t.equal(res.headers.get('content-type'), 'text/markdown');
    t.same((await objectRows(app, 'private')).map((r) => r.name), ['a/1.txt']);
    if (backend === 'disk') {
      await until(() => storedFiles(app).length === 2, 'the replaced file to go');
      t.same(storedFiles(app), [`private/a/1.txt/${up2.id}`, `public/p.txt/${(await objectRows(app, 'public'))[0].id}`], 'one file per object, the old version removed');
    }
    if (backend === 'database') t.equal(await chunkCount(app), 2, 'the old chunks went with the old row');

    // list
    t.equal((await put('private/a/2.txt', alice, '22')).status, 200);
    t.equal((await put('private/b/3.txt', alice, '333')).status, 200);
    t.equal((await put('private/bob.txt', bob, 'b')).status, 200);
    let r = await app.call('GET', '/storage/v1/object/list/private?prefix=a/', { token: alice });
    t.equal(r.status, 200);
    t.same(r.body.map((o: { name: string }) => o.name), ['a/1.txt', 'a/2.txt'], 'names are full paths, prefix filters');
    t.same(Object.keys(r.body[0]).sort(), ['created_at', 'id', 'mime_type', 'name', 'size', 'updated_at']);
    t.equal(r.body[1].size, 2);
    r = await app.call('GET', '/storage/v1/object/list/private', { token: alice });
    t.same(r.body.map((o: { name: string }) => o.name), ['a/1.txt', 'a/2.txt', 'b/3.txt'], 'only the caller\'s own');
    r = await app.call('GET', '/storage/v1/object/list/private', { token: bob });
    t.same(r.body.map((o: { name: string }) => o.name), ['bob.txt']);
    r = await app.call('GET', '/storage/v1/object/list/private', { token: svc });
    t.equal(r.body.length, 4, 'service role lists all');
    r = await app.call('GET', '/storage/v1/object/list/private?prefix=a%25', { token: alice });
    t.same(r.body, [], 'prefix is literal (no LIKE wildcards)');
    r = await app.call('GET', '/storage/v1/object/list/public', { token: app.anonKey });
    t.same(r.body.map((o: { name: string }) => o.name), ['p.txt'], 'anon lists a public bucket');
    r = await app.call('GET', '/storage/v1/object/list/nobucket', { token: alice });
    t.equal(r.status, 404);

    // delete
    r = await app.call('DELETE', '/storage/v1/object/private/a/2.txt', { token: bob });
    t.equal(r.status, 404, 'another user cannot delete it');
    r = await app.call('DELETE', '/storage/v1/object/private/a/2.txt', { token: app.anonKey });
    t.equal(r.status, 404);
    r = await app.call('DELETE', '/storage/v1/object/public/p.txt', { token: app.anonKey });
    t.equal(r.status, 403, 'anon sees a public object but may not delete it');
    t.same(r.body, { error: 'permission denied' });
    r = await app.call('DELETE', '/storage/v1/object/private/a/2.txt', { token: alice });
    t.equal(r.status, 200);
    t.same(r.body, { message: 'object deleted' });
    r = await app.call('DELETE', '/storage/v1/object/private/a/2.txt', { token: alice });
    t.equal(r.status, 404);
    res = await get('private/a/2.txt', alice);
    t.equal(res.status, 404);
    await res.arrayBuffer();
    r = await app.call('DELETE', '/storage/v1/object/private/bob.txt', { token: svc });
    t.equal(r.status, 200, 'service role deletes anything');
    if (backend === 'disk') {
      await until(() => !storedFiles(app).some((f) => f.startsWith('private/a/2.txt') || f.startsWith('private/bob.txt')), 'deleted files to go');
      t.notOk(storedFiles(app).some((f) => f.startsWith('private/a/2.txt')), 'the file is gone');
    }
  });

  t.test('limits: 413 over file_size_limit, 415 outside allowed_mime_types, MIME by extension (contract §7)', async (t) => {
    const { app, alice, mkBucket, put, get } = await setup(t, backend);
    await mkBucket({ id: 'small', file_size_limit: 10 });
    await mkBucket({ id: 'images', allowed_mime_types: ['image/png', 'text/*'] });
    await mkBucket({ id: 'any' });

    let res = await put('small/ok.bin', alice, Buffer.alloc(10));
    t.equal(res.status, 200, 'exactly the limit');
    res = await put('small/big.bin', alice, Buffer.alloc(11));
    t.equal(res.status, 413, 'declared size over the limit');
    t.same(await res.json(), { error: 'object exceeds the bucket file size limit' });
    // A chunked body (no Content-Length): the counter stops it.
    res = await settled(await app.fetch('/storage/v1/object/small/chunked.bin', {
      method: 'POST',
      headers: { authorization: `Bearer ${alice}` },
      body: new ReadableStream({
        start(c) {
          c.enqueue(new Uint8Array(6));
          c.enqueue(new Uint8Array(6));
          c.close();
        },
      }),
      duplex: 'half',
    } as RequestInit));
    t.equal(res.status, 413, 'streamed size over the limit');
    t.same((await objectRows(app, 'small')).map((r) => r.name), ['ok.bin'], 'no row left by refused uploads');
    t.equal(await chunkCount(app), backend === 'database' ? 1 : 0, 'no chunk left');
    if (backend === 'disk') t.same(storedFiles(app).filter((f) => !f.startsWith('small/ok.bin/')), [], 'no file left');

    res = await put('images/a.png', alice, 'png', { 'content-type': 'image/png' });
    t.equal(res.status, 200);
    res = await put('images/a.txt', alice, 'txt', { 'content-type': 'text/plain; charset=utf-8' });
    t.equal(res.status, 200, 'wildcard text/*');
    res = await put('images/a.gif', alice, 'gif', { 'content-type': 'image/gif' });
    t.equal(res.status, 415);
    t.same(await res.json(), { error: 'mime type not allowed' });
    res = await put('images/b.gif', alice, 'gif');
    t.equal(res.status, 415, 'the type guessed from the extension is checked too');

    res = await put('any/data.json', alice, '{}');
    t.equal(res.status, 200);
    res = await get('any/data.json', alice);
    t.equal(res.headers.get('content-type'), 'application/json', 'by extension when the body has no type');
    await res.arrayBuffer();
    res = await put('any/noext', alice, 'x', { 'content-type': 'application/octet-stream' });
    t.equal(res.status, 200);
    res = await get('any/noext', alice);
    t.equal(res.headers.get('content-type'), 'application/octet-stream', 'else application/octet-stream');
    await res.arrayBuffer();
    res = await put('any/pic.png', alice, 'x', { 'content-type': 'application/octet-stream' });
    t.equal(res.status, 200);
    res = await get('any/pic.png', alice);
    t.equal(res.headers.get('content-type'), 'image/png', 'octet-stream says nothing: the extension decides');
    await res.arrayBuffer();
  });

  t.test('multipart: the part `file` streams in with its own type', async (t) => {
    const { app, alice, mkBucket, get } = await setup(t, backend);
    await mkBucket({ id: 'm' });
    const bytes = randomBytes(300 * 1024);
    const form = new FormData();
    form.append('note', 'ignored field');
    form.append('file', new Blob([bytes], { type: 'image/webp' }), 'photo.webp');
    let res = await settled(await app.fetch('/storage/v1/object/m/dir/photo.webp', { method: 'POST', headers: { authorization: `Bearer ${alice}` }, body: form }));
    t.equal(res.status, 200);
    t.equal(((await res.json()) as any).key, 'm/dir/photo.webp');
    res = await get('m/dir/photo.webp', alice);
    t.equal(res.headers.get('content-type'), 'image/webp', 'the part\'s Content-Type');
    t.equal(sha256(Buffer.from(await res.arrayBuffer())), sha256(bytes), 'same bytes');

    const noFile = new FormData();
    noFile.append('other', 'x');
    res = await settled(await app.fetch('/storage/v1/object/m/none.txt', { method: 'POST', headers: { authorization: `Bearer ${alice}` }, body: noFile }));
    t.equal(res.status, 400, 'no part named file');
    t.same(await res.json(), { error: 'missing file part' });
    t.same((await objectRows(app, 'm')).map((r) => r.name), ['dir/photo.webp']);
  });

  t.test('download: ETag / If-None-Match, Range, HEAD, Cache-Control', async (t) => {
    const { app, alice, mkBucket, put, get } = await setup(t, backend);
    await mkBucket({ id: 'd' });
    const bytes = randomBytes(1_500_000); // spans several database chunks
    t.equal((await put('d/blob.bin', alice, bytes)).status, 200);
    let res = await get('d/blob.bin', alice);
    const etag = res.headers.get('etag')!;
    t.match(etag, /^"[^"]+"$/);
    t.equal(res.headers.get('content-length'), String(bytes.length));
    t.equal(res.headers.get('accept-ranges'), 'bytes');
    t.equal(sha256(Buffer.from(await res.arrayBuffer())), sha256(bytes));

    res = await get('d/blob.bin', alice, { 'if-none-match': etag });
    t.equal(res.status, 304, 'If-None-Match → 304');
    t.equal((await res.arrayBuffer()).byteLength, 0);
    res = await get('d/blob.bin', alice, { 'if-none-match': '"other"' });
    t.equal(res.status, 200);
    await res.arrayBuffer();

    for (const [range, start, end] of [
      ['bytes=0-99', 0, 99],
      ['bytes=524000-525000', 524000, 525000],
      ['bytes=1499990-', 1499990, 1499999],
      ['bytes=-10', 1499990, 1499999],
      ['bytes=1000000-9999999', 1000000, 1499999],
    ] as const) {
      res = await get('d/blob.bin', alice, { range });
      t.equal(res.status, 206, `${range} → 206`);
      t.equal(res.headers.get('content-range'), `bytes ${start}-${end}/${bytes.length}`);
      const got = Buffer.from(await res.arrayBuffer());
      t.ok(got.equals(bytes.subarray(start, end + 1)), `${range}: the right bytes`);
    }
    res = await get('d/blob.bin', alice, { range: 'bytes=2000000-' });
    t.equal(res.status, 416);
    t.equal(res.headers.get('content-range'), `bytes */${bytes.length}`);
    await res.arrayBuffer();

    res = await settled(await app.fetch('/storage/v1/object/d/blob.bin', { method: 'HEAD', headers: { authorization: `Bearer ${alice}` } }));
    t.equal(res.status, 200);
    t.equal(res.headers.get('content-length'), String(bytes.length));
    t.equal(res.headers.get('etag'), etag);
    t.equal(res.headers.get('cache-control'), 'private, no-cache');
    t.equal((await res.arrayBuffer()).byteLength, 0, 'HEAD has no body');
  });

  t.test('stored script: every download is nosniff and sandboxed, active types are attachments, the extension wins', async (t) => {
    const { app, alice, svc, mkBucket, put, get } = await setup(t, backend);
    await mkBucket({ id: 'files' });
    await mkBucket({ id: 'pub', public: true });
    await mkBucket({ id: 'images', allowed_mime_types: ['image/png'] });
    const SCRIPT = '<html><body><script>document.title = "pwned"</script></body></html>';
    const SANDBOX = "default-src 'none'; sandbox";
    const typeOf = async (bucket: string, name: string) =>
      ((await app.db.sql`select mime_type from storage.objects where bucket_id = ${bucket} and name = ${name}`)[0] as { mime_type: string }).mime_type;
    /** The download headers that matter here, with the body read. */
    const headersOf = async (r: Awaited<ReturnType<typeof get>>) => {
      await r.arrayBuffer();
      return {
        status: r.status,
        type: r.headers.get('content-type'),
        nosniff: r.headers.get('x-content-type-options'),
        csp: r.headers.get('content-security-policy'),
        disposition: r.headers.get('content-disposition'),
      };
    };
    const inline = (type: string) => ({ status: 200, type, nosniff: 'nosniff', csp: SANDBOX, disposition: null });
    const attached = (type: string, file: string, status = 200) => ({
      status,
      type,
      nosniff: 'nosniff',
      csp: SANDBOX,
      disposition: `attachment; filename="${file}"; filename*=UTF-8''${encodeURIComponent(file)}`,
    });

    // The attack of the review: HTML declared for a name that says PNG.
    t.equal((await put('files/evil.png', alice, SCRIPT, { 'content-type': 'text/html' })).status, 200, 'the upload succeeds');
    t.equal(await typeOf('files', 'evil.png'), 'image/png', 'stored with the type of its extension');
    t.same(await headersOf(await get('files/evil.png', alice)), inline('image/png'), 'served as an image, never sniffed');

    // The other way round: a declared image type does not make an .html file passive (nor pass a bucket's list).
    t.equal((await put('files/evil.html', alice, SCRIPT, { 'content-type': 'image/png' })).status, 200);
    t.equal(await typeOf('files', 'evil.html'), 'text/html');
    t.same(await headersOf(await get('files/evil.html', alice)), attached('text/html', 'evil.html'));
    const refused = await put('images/evil.html', alice, SCRIPT, { 'content-type': 'image/png' });
    t.equal(refused.status, 415, "allowed_mime_types judges the extension's type");
    t.same(await refused.json(), { error: 'mime type not allowed' });

    // Every type a browser runs is an attachment, whatever the bucket or the way it is read.
    for (const [name, declared, stored] of [
      ['page.html', 'text/html; charset=utf-8', 'text/html; charset=utf-8'],
      ['page.xhtml', undefined, 'application/xhtml+xml'],
      ['pic.svg', 'image/svg+xml', 'image/svg+xml'],
      ['data.xml', 'text/xml', 'text/xml'],
      ['feed.atom', undefined, 'application/atom+xml'],
      ['app.js', 'application/javascript', 'application/javascript'],
      ['mod.mjs', undefined, 'text/javascript'],
      ['noext', 'text/html', 'text/html'],
    ] as const) {
      t.equal((await put(`pub/${name}`, alice, SCRIPT, declared ? { 'content-type': declared } : {})).status, 200, `${name} uploaded`);
      t.same(await headersOf(await get(`pub/${name}`, app.anonKey)), attached(stored, name), `${name}: public GET`);
      t.same(await headersOf(await get(`pub/${name}`, alice)), attached(stored, name), `${name}: authenticated GET`);
      t.same(await headersOf(await get(`pub/${name}`, svc, { range: 'bytes=0-9' })), attached(stored, name, 206), `${name}: a range`);
      const head = await settled(await app.fetch(`/storage/v1/object/pub/${name}`, { method: 'HEAD', headers: { authorization: `Bearer ${alice}` } }));
      t.same(await headersOf(head), attached(stored, name), `${name}: HEAD`);
      const etag = (await get(`pub/${name}`, alice)).headers.get('etag')!;
      const notModified = await headersOf(await get(`pub/${name}`, alice, { 'if-none-match': etag }));
      t.same([notModified.status, notModified.nosniff, notModified.csp, notModified.disposition], [304, 'nosniff', SANDBOX, attached(stored, name).disposition], `${name}: 304`);
    }

    // Passive types stay inline, still nosniff and sandboxed; a declared passive type stands.
    t.equal((await put('files/notes.txt', alice, 'x', { 'content-type': 'text/markdown' })).status, 200);
    t.same(await headersOf(await get('files/notes.txt', alice)), inline('text/markdown'));
    t.equal((await put('files/raw.bin', alice, 'x')).status, 200);
    t.same(await headersOf(await get('files/raw.bin', alice)), inline('application/octet-stream'));

    // A browser reads `text/plain;a=b, text/html` as HTML: the stored type keeps type/subtype and charset only.
    t.equal((await put('files/trick', alice, SCRIPT, { 'content-type': 'text/plain;a=b, text/html' })).status, 200);
    t.equal(await typeOf('files', 'trick'), 'text/plain');
    t.equal((await put('files/trick2', alice, SCRIPT, { 'content-type': 'TEXT/PLAIN; Charset="utf-8"; x=", text/html"' })).status, 200);
    t.equal(await typeOf('files', 'trick2'), 'text/plain; charset=utf-8');

    // Multipart: the part's type meets the same rule.
    const form = new FormData();
    form.append('file', new Blob([SCRIPT], { type: 'text/html' }), 'evil.png');
    const mp = await settled(await app.fetch('/storage/v1/object/files/multi/evil.png', { method: 'POST', headers: { authorization: `Bearer ${alice}` }, body: form }));
    t.equal(mp.status, 200);
    t.equal(await typeOf('files', 'multi/evil.png'), 'image/png');

    // Rows stored before this rule: the download headers hold on their own.
    await app.db.sql`update storage.objects set mime_type = 'text/html' where bucket_id = 'files' and name = 'evil.png'`;
    t.same(await headersOf(await get('files/evil.png', alice)), attached('text/html', 'evil.png'), 'an HTML row named .png: an attachment');
    await app.db.sql`update storage.objects set mime_type = 'text/plain;a=b, text/html' where bucket_id = 'files' and name = 'notes.txt'`;
    t.same(await headersOf(await get('files/notes.txt', alice)), inline('text/plain'), 'a stored list of types: only the first, as plinth reads it');

    // A file name that is not plain ASCII: a safe quoted name and the exact one in UTF-8.
    const odd = 'dir/ünï "q";x.html';
    t.equal((await put(`files/${odd.split('/').map(encodeURIComponent).join('/')}`, alice, SCRIPT)).status, 200);
    const oddHeaders = await headersOf(await get(`files/${odd.split('/').map(encodeURIComponent).join('/')}`, alice));
    t.equal(oddHeaders.disposition, `attachment; filename="_n_ _q_;x.html"; filename*=UTF-8''%C3%BCn%C3%AF%20%22q%22%3Bx.html`);
  });

  t.test('a 20 MiB round trip, past MAX_BODY_BYTES, by sha256', async (t) => {
    const { app, alice, mkBucket, put, get } = await setup(t, backend);
    await mkBucket({ id: 'big' });
    const bytes = randomBytes(20 * 1024 * 1024);
    const res = await put('big/twenty.bin', alice, bytes);
    t.equal(res.status, 200);
    await res.arrayBuffer();
    const back = await get('big/twenty.bin', alice);
    t.equal(back.status, 200);
    t.equal(sha256(Buffer.from(await back.arrayBuffer())), sha256(bytes), 'the same bytes come back');
    const [row] = await app.db.sql`select size from storage.objects where name = 'twenty.bin'`;
    t.equal(Number(row.size), bytes.length);
  });

  t.test('path validation on every verb; nothing written outside the bucket', async (t) => {
    const { app, alice, mkBucket, put } = await setup(t, backend);
    await mkBucket({ id: 'safe' });
    t.equal((await put('safe/keep.txt', alice, 'keep')).status, 200);
    const before = storedFiles(app);
    const bad = [
      'safe/../x.txt',
      'safe/a/../../x.txt',
      'safe/..',
      'safe/%2e%2e/x.txt',
      'safe/%2E%2E/x.txt',
      'safe/.%2e/x.txt',
      'safe/a%2f..%2f..%2fx.txt',
      'safe/..%5cx.txt',
      'safe/a%5Cb.txt',
      'safe/%5C%5Cserver%5Cshare%5Cx.txt',
      'safe//server/share/x.txt',
      'safe//etc/passwd',
      'safe/%2Fetc%2Fpasswd',
      'safe/C:/x.txt',
      'safe/c%3A%5Cwindows%5Cx.txt',
      'safe/a%00b.txt',
      'safe/a%01b.txt',
      'safe/a%7Fb.txt',
      'safe/a%0Ab.txt',
      'safe/a//b.txt',
      'safe/a/',
      'safe/./x.txt',
      'safe/%2e/x.txt',
      'safe/%zz.txt',
      '../safe/x.txt',
      '%2e%2e/safe/x.txt',
      'sa%2Ffe/x.txt',
      'safe/',
      `safe/${'a'.repeat(256)}`,
    ];
    const auth = { authorization: `Bearer ${alice}` };
    for (const p of bad) {
      for (const method of ['POST', 'GET', 'HEAD', 'DELETE']) {
        const r = await raw(app.url, method, `/storage/v1/object/${p}`, { ...auth, 'content-type': 'text/plain' }, method === 'POST' ? 'evil' : undefined);
        t.equal(r.status, 400, `${method} ${p} → 400`);
        // A malformed escape is refused by the router itself (fastify's FST_ERR_BAD_URL), before any route.
        if (method !== 'HEAD' && !p.includes('%zz')) t.same(r.json(), { error: 'invalid object path' }, `${method} ${p}: message`);
      }
    }
    for (const p of ['..', '%2e%2e', 'a%5Cb', 'a%00']) {
      const r = await raw(app.url, 'GET', `/storage/v1/object/list/${p}`, auth);
      t.equal(r.status, 400, `list ${p} → 400`);
      const d = await raw(app.url, 'DELETE', `/storage/v1/bucket/${p}`, { authorization: `Bearer ${app.serviceKey}` });
      t.equal(d.status, 400, `bucket delete ${p} → 400`);
    }
    t.same((await objectRows(app, 'safe')).map((r) => r.name), ['keep.txt'], 'no row written');
    t.same(storedFiles(app), before, 'no file written in the store');
    if (app.parent) t.same(filesUnder(app.parent).filter((f) => !f.startsWith('files/')), [], 'nothing outside STORAGE_DIR');
    const [n] = await app.db.sql`select count(*)::int as n from storage.objects`;
    t.equal(n.n, 1);
    // A name that only looks odd is fine.
    t.equal((await put('safe/a..b/%252e%252e/x%20y.txt', alice, 'ok')).status, 200, 'dots inside a segment and %25 are names');
  });

  t.test('an upload cut off mid-body leaves no row, no file, no chunk', async (t) => {
    const { app, alice, mkBucket } = await setup(t, backend);
    await mkBucket({ id: 'cut' });
    const u = new URL(app.url);
    let started = false;
    await new Promise<void>((resolve) => {
      const req = http.request({
        host: u.hostname,
        port: u.port,
        method: 'POST',
        path: '/storage/v1/object/cut/partial.bin',
        headers: { authorization: `Bearer ${alice}`, 'content-length': String(8 * 1024 * 1024), 'content-type': 'application/octet-stream' },
        agent: false,
      });
      req.on('error', () => resolve());
      req.on('response', (res) => {
        res.resume();
        resolve();
      });
      req.write(randomBytes(3 * 1024 * 1024), () => {
        // Wait until the server's upload transaction has its row (begin_upload ran; on the
        // database back end, the chunks' COPY follows), then cut the connection.
        void until(
          async () =>
            (
              await app.db.sql`select 1 from pg_stat_activity
                where datname = current_database() and pid <> pg_backend_pid()
                  and (query like '%storage.begin_upload%' or query like '%storage.chunk_copy%')`
            ).length > 0,
          'the upload to start',
        ).then(
          () => {
            started = true;
            req.destroy();
            resolve();
          },
          () => {
            req.destroy();
            resolve();
          },
        );
      });
    });
    // The upload's transaction ends only once the server is done with the body (bytes
    // removed); while begin_upload still runs it is 'active', not 'idle in transaction'.
    await until(async () => {
      const rows = await app.db.sql`select 1 from pg_stat_activity
        where datname = current_database() and pid <> pg_backend_pid()
          and xact_start is not null and query like '%storage.%'`;
      return rows.length === 0;
    }, 'the upload transaction to end');
    await until(async () => (await objectRows(app, 'cut')).length === 0 && storedFiles(app).length === 0, 'nothing left', 10000).catch(() => {});
    t.ok(started, 'the connection was cut while the upload transaction was open');
    t.same(await objectRows(app, 'cut'), [], 'no row');
    t.equal(await chunkCount(app), 0, 'no chunk');
    t.same(storedFiles(app), [], 'no file (temporary ones included)');
    // The service is fine afterwards.
    const res = await settled(await app.fetch('/storage/v1/object/cut/after.txt', { method: 'POST', headers: { authorization: `Bearer ${alice}` }, body: 'ok' }));
    t.equal(res.status, 200);
  });

  t.test('a refused caller is told before the body is read to its end', async (t) => {
    const { app, mkBucket } = await setup(t, backend);
    await mkBucket({ id: 'closed' });
    const u = new URL(app.url);
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request({
        host: u.hostname,
        port: u.port,
        method: 'POST',
        path: '/storage/v1/object/closed/big.bin',
        headers: { authorization: `Bearer ${app.anonKey}`, 'content-length': String(40 * 1024 * 1024) },
        agent: false,
      });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode!);
        req.destroy();
      });
      req.on('error', (err) => reject(err));
      req.write(randomBytes(64 * 1024)); // far less than declared: the answer cannot wait for the rest
    });
    t.equal(status, 403, 'anon is refused with 64 KiB of 40 MiB sent');
  });

  t.test('concurrent uploads to one path: exactly one wins without x-upsert', async (t) => {
    const { app, alice, mkBucket, put, get } = await setup(t, backend);
    await mkBucket({ id: 'race' });
    const bodies = Array.from({ length: 6 }, () => randomBytes(200 * 1024));
    const results = await Promise.all(bodies.map(async (b) => {
      const r = await put('race/one.bin', alice, b);
      await r.arrayBuffer();
      return r.status;
    }));
    t.equal(results.filter((s) => s === 200).length, 1, 'one 200');
    t.equal(results.filter((s) => s === 409).length, 5, 'the rest 409');
    const winner = bodies[results.indexOf(200)];
    const res = await get('race/one.bin', alice);
    t.equal(sha256(Buffer.from(await res.arrayBuffer())), sha256(winner), 'the winner\'s bytes');
    t.equal((await objectRows(app, 'race')).length, 1);
    if (backend === 'database') t.equal(await chunkCount(app), 1);
    if (backend === 'disk') t.equal(storedFiles(app).length, 1, 'one file');

    const up = await Promise.all(bodies.map(async (b) => {
      const r = await put('race/one.bin', alice, b, { 'x-upsert': 'true' });
      await r.arrayBuffer();
      return r.status;
    }));
    t.same(up, bodies.map(() => 200), 'with x-upsert all succeed, one after the other');
    t.equal((await objectRows(app, 'race')).length, 1, 'still one row');
    if (backend === 'disk') await until(() => storedFiles(app).length === 1, 'replaced files to go');
    if (backend === 'database') t.equal(await chunkCount(app), 1, 'one object\'s chunks');
  });

  t.test('a DBA may replace the policies and plinth honours them', async (t) => {
    const { app, alice, bob, mkBucket, put, get } = await setup(t, backend);
    await mkBucket({ id: 'shared' });
    await app.db.sql.unsafe(`
      drop policy objects_owner_read on storage.objects;
      drop policy objects_owner_insert on storage.objects;
      create policy team_read on storage.objects for select to authenticated using (bucket_id = 'shared');
      create policy anon_drop on storage.objects for insert to anon with check (bucket_id = 'shared' and name like 'inbox/%');
      create policy team_insert on storage.objects for insert to authenticated with check (bucket_id = 'shared' and owner = auth.uid() and name not like 'locked/%');
    `);
    let res = await put('shared/inbox/hi.txt', app.anonKey, 'from anon');
    t.equal(res.status, 200, 'anon may drop into inbox/');
    res = await put('shared/other.txt', app.anonKey, 'x');
    t.equal(res.status, 403, 'but nowhere else');
    res = await put('shared/a.txt', alice, 'alice');
    t.equal(res.status, 200);
    res = await put('shared/locked/a.txt', alice, 'alice');
    t.equal(res.status, 403, "the DBA's insert rule");
    res = await get('shared/a.txt', bob);
    t.equal(res.status, 200, "bob reads alice's object under the team policy");
    t.equal(await res.text(), 'alice');
    const r = await app.call('DELETE', '/storage/v1/object/shared/a.txt', { token: bob });
    t.equal(r.status, 403, 'visible but not deletable: 403');
  });
}
