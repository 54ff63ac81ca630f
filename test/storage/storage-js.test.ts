/**
 * `@supabase/storage-js`, unchanged, against a real plinth: every call a Supabase user makes
 * (buckets, upload with upsert / contentType / cacheControl, update, download, info, exists,
 * list with its options, move, copy, remove, signed URLs, signed uploads, public URLs), on
 * the disk and database back ends, with an anon key and a user's token as a browser sends them.
 */
import t from 'tap';
import { StorageClient } from '@supabase/storage-js';
import { randomUUID } from 'node:crypto';
import { startStorageApp, userToken, type BackendName } from './helpers.ts';

/** Everything a storage-js error carries (its class, message, status, the error under it), for a failure's diagnostics. */
function whole(err: Error | null): Record<string, unknown> | null {
  if (err === null) return null;
  const under = (err as { originalError?: unknown }).originalError ?? err.cause;
  const fields = (e: Error) => ({ ...e, name: e.name, message: e.message, stack: e.stack });
  return { ...fields(err), ...(under === undefined ? {} : { under: under instanceof Error ? fields(under) : under }) };
}

for (const backend of ['disk', 'database'] as BackendName[]) {
  t.test(`storage-js on the ${backend} back end`, async (t) => {
    const app = await startStorageApp(t, backend);
    const url = `${app.url}/storage/v1`;
    const admin = new StorageClient(url, { apikey: app.serviceKey, Authorization: `Bearer ${app.serviceKey}` });
    const aliceId = randomUUID();
    const alice = new StorageClient(url, { apikey: app.anonKey, Authorization: `Bearer ${await userToken(aliceId)}` });
    const bob = new StorageClient(url, { apikey: app.anonKey, Authorization: `Bearer ${await userToken()}` });
    const anon = new StorageClient(url, { apikey: app.anonKey, Authorization: `Bearer ${app.anonKey}` });

    // ---- buckets ----
    t.same((await admin.createBucket('docs', { public: false })).error, null, 'createBucket');
    t.same((await admin.createBucket('pics', { public: true, fileSizeLimit: 1000, allowedMimeTypes: ['image/*'] })).error, null);
    const dup = await admin.createBucket('docs');
    t.equal(dup.error?.status, 409, 'createBucket twice: 409');
    t.equal(dup.error?.message, 'bucket already exists');
    const list = await alice.listBuckets();
    t.same(list.data?.map((b) => b.id), ['docs', 'pics'], 'listBuckets');
    const got = await alice.getBucket('pics');
    t.match(got.data, { id: 'pics', name: 'pics', public: true, file_size_limit: 1000, allowed_mime_types: ['image/*'] }, 'getBucket');
    t.equal((await alice.getBucket('nope')).error?.status, 404, 'getBucket: unknown is 404');
    t.same((await admin.updateBucket('pics', { public: true, fileSizeLimit: 2000 })).error, null, 'updateBucket');
    t.match((await admin.getBucket('pics')).data, { file_size_limit: 2000, allowed_mime_types: ['image/*'] }, 'updateBucket keeps what it was not sent');
    t.equal((await alice.updateBucket('pics', { public: false })).error?.status, 403, 'updateBucket needs the service role');

    // ---- upload, download, info, exists ----
    const docs = alice.from('docs');
    const up = await docs.upload('ada/notes.txt', Buffer.from('hello'), { contentType: 'text/plain', cacheControl: '60' });
    t.same(up.error, null, 'upload');
    t.equal(up.data?.path, 'ada/notes.txt');
    const again = await docs.upload('ada/notes.txt', Buffer.from('x'));
    t.equal(again.error?.status, 409, 'upload to a taken path: 409');
    t.same((await docs.upload('ada/notes.txt', Buffer.from('hello, world'), { upsert: true, contentType: 'text/plain' })).error, null, 'upsert');
    const blob = await docs.upload('ada/blob.json', new Blob(['{"a":1}'], { type: 'application/json' }), { cacheControl: '120' });
    t.same(blob.error, null, 'upload of a Blob (multipart, unnamed part)');
    const dl = await docs.download('ada/notes.txt');
    t.equal(await dl.data?.text(), 'hello, world', 'download');
    const dlBlob = await docs.download('ada/blob.json');
    t.equal(await dlBlob.data?.text(), '{"a":1}');
    t.equal(dlBlob.data?.type, 'application/json');
    const info = await docs.info('ada/blob.json');
    t.match(info.data, { name: 'ada/blob.json', size: 7, contentType: 'application/json', cacheControl: 'max-age=120' }, 'info');
    t.same(await docs.exists('ada/blob.json'), { data: true, error: null }, 'exists');
    t.equal((await docs.exists('ada/none.txt')).data, false, 'exists: false');
    t.equal((await bob.from('docs').download('ada/notes.txt')).error?.status, 404, "bob cannot read alice's file");
    const raw = await fetch(`${url}/object/docs/ada/blob.json`, { headers: { authorization: `Bearer ${await userToken(aliceId)}` } });
    t.equal(raw.headers.get('cache-control'), 'private, max-age=120', 'the cacheControl asked for, kept private in a private bucket');
    await raw.arrayBuffer();

    // update replaces
    t.same((await docs.update('ada/notes.txt', Buffer.from('v2'), { contentType: 'text/plain' })).error, null, 'update');
    t.equal(await (await docs.download('ada/notes.txt')).data?.text(), 'v2');

    // ---- list ----
    for (const n of ['ada/a.txt', 'ada/b.txt', 'ada/sub/c.txt', 'top.txt']) {
      t.same((await docs.upload(n, Buffer.from(n), { contentType: 'text/plain' })).error, null);
    }
    const folder = await docs.list('ada');
    t.same(folder.data?.map((e) => [e.name, e.id === null]), [['a.txt', false], ['b.txt', false], ['blob.json', false], ['notes.txt', false], ['sub', true]], 'list: the folder, files and sub-folders');
    t.match(folder.data?.[0], { metadata: { size: 9, mimetype: 'text/plain' } }, 'list: metadata');
    const root = await docs.list();
    t.same(root.data?.map((e) => e.name), ['ada', 'top.txt'], 'list: the root');
    const paged = await docs.list('ada', { limit: 2, offset: 1, sortBy: { column: 'name', order: 'desc' } });
    t.same(paged.data?.map((e) => e.name), ['notes.txt', 'blob.json'], 'list: limit, offset, sortBy');
    const searched = await docs.list('ada', { search: 'B' });
    t.same(searched.data?.map((e) => e.name), ['b.txt', 'blob.json'], 'list: search');
    t.equal((await docs.list('ada', { sortBy: { column: 'size', order: 'asc' } })).error?.status, 400, 'list: an unknown sort column');

    // ---- copy, move, remove ----
    const copied = await docs.copy('ada/a.txt', 'ada/a-copy.txt');
    t.same(copied.data, { path: 'docs/ada/a-copy.txt' }, 'copy');
    t.equal(await (await docs.download('ada/a-copy.txt')).data?.text(), 'ada/a.txt');
    const taken = await docs.copy('ada/a.txt', 'ada/b.txt');
    t.equal(taken.error?.status, 409, 'copy onto a taken path: 409', { error: whole(taken.error) });
    t.equal((await docs.copy('ada/none.txt', 'ada/z.txt')).error?.status, 404, 'copy of nothing: 404');
    t.same((await docs.move('ada/a-copy.txt', 'moved/a.txt')).error, null, 'move');
    t.equal(await (await docs.download('moved/a.txt')).data?.text(), 'ada/a.txt');
    t.equal((await docs.download('ada/a-copy.txt')).error?.status, 404, 'moved away');
    t.equal((await bob.from('docs').move('moved/a.txt', 'bob.txt')).error?.status, 404, "bob cannot move alice's file");
    const removed = await docs.remove(['moved/a.txt', 'top.txt', 'not-there.txt']);
    t.same(removed.data?.map((o) => o.name), ['moved/a.txt', 'top.txt'], 'remove: the objects removed');
    t.equal((await docs.download('top.txt')).error?.status, 404);

    // ---- signed URLs ----
    const signed = await docs.createSignedUrl('ada/b.txt', 60);
    t.same(signed.error, null, 'createSignedUrl');
    const viaSigned = await fetch(signed.data!.signedUrl);
    t.equal(viaSigned.status, 200, 'a signed URL serves without credentials');
    t.equal(await viaSigned.text(), 'ada/b.txt');
    const ranged = await fetch(signed.data!.signedUrl, { headers: { range: 'bytes=0-2' } });
    t.equal(ranged.status, 206, 'with ranges');
    t.equal(await ranged.text(), 'ada');
    const token = new URL(signed.data!.signedUrl).searchParams.get('token')!;
    const other = await fetch(`${url}/object/sign/docs/ada/a.txt?token=${token}`);
    t.same([other.status, await other.json()], [400, { error: 'invalid signature' }], 'a token for one path never serves another');
    const tampered = await fetch(`${url}/object/sign/docs/ada/b.txt?token=${token.slice(0, -2)}xx`);
    t.same([tampered.status, await tampered.json()], [400, { error: 'invalid signature' }], 'a tampered token');
    t.equal((await bob.from('docs').createSignedUrl('ada/b.txt', 60)).error?.status, 404, "bob cannot sign alice's file");
    const many = await docs.createSignedUrls(['ada/a.txt', 'ada/none.txt'], 60);
    t.same(many.data?.map((d) => [d.path, d.error, d.signedUrl !== null]), [['ada/a.txt', null, true], ['ada/none.txt', 'object not found', false]], 'createSignedUrls');
    t.equal(await (await fetch(many.data![0].signedUrl!)).text(), 'ada/a.txt');
    const dlName = await docs.createSignedUrl('ada/b.txt', 60, { download: 'x.txt' });
    const withName = await fetch(dlName.data!.signedUrl);
    t.match(withName.headers.get('content-disposition'), /attachment; filename\*=UTF-8''x\.txt/, 'download: a file name');
    await withName.arrayBuffer();

    // ---- signed uploads ----
    const su = await docs.createSignedUploadUrl('ada/signed.txt');
    t.same(su.error, null, 'createSignedUploadUrl');
    const put = await anon.from('docs').uploadToSignedUrl('ada/signed.txt', su.data!.token, Buffer.from('signed!'), { contentType: 'text/plain' });
    t.same(put.error, null, 'uploadToSignedUrl, with nothing but the anon key');
    t.equal(put.data?.fullPath, 'docs/ada/signed.txt');
    t.equal(await (await docs.download('ada/signed.txt')).data?.text(), 'signed!', 'the signer owns it and reads it');
    const reuse = await anon.from('docs').uploadToSignedUrl('ada/signed.txt', su.data!.token, Buffer.from('again'), { upsert: true });
    t.equal(reuse.error?.status, 403, 'a signed upload URL uploads once');
    const elsewhere = await anon.from('docs').uploadToSignedUrl('ada/other.txt', su.data!.token, Buffer.from('x'));
    t.equal(elsewhere.error?.status, 400, 'not for another path');
    t.equal((await anon.from('docs').createSignedUploadUrl('x.txt')).error?.status, 403, 'anon may not insert: no signed upload URL');

    // ---- public URLs ----
    const pics = admin.from('pics');
    t.same((await pics.upload('p.png', Buffer.from('png'), { contentType: 'image/png' })).error, null);
    const pub = pics.getPublicUrl('p.png');
    const viaPublic = await fetch(pub.data.publicUrl);
    t.equal(viaPublic.status, 200, 'getPublicUrl serves with no credentials');
    t.equal(await viaPublic.text(), 'png');
    const notPublic = await fetch(alice.from('docs').getPublicUrl('ada/b.txt').data.publicUrl);
    t.equal(notPublic.status, 404, 'no public URL into a private bucket');
    await notPublic.arrayBuffer();

    // ---- emptyBucket, deleteBucket ----
    t.equal((await admin.deleteBucket('docs')).error?.status, 409, 'deleteBucket: not empty');
    t.same((await admin.emptyBucket('docs')).error, null, 'emptyBucket');
    t.same((await admin.from('docs').list('ada')).data, [], 'empty');
    t.same((await admin.deleteBucket('docs')).error, null, 'deleteBucket');
    t.equal((await admin.getBucket('docs')).error?.status, 404);
  });
}
