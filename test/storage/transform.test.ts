/**
 * Image transformations: dimensions and formats checked by decoding the answers with
 * sharp (never by their size), through the routes and through storage-js's `download`,
 * `getPublicUrl` and `createSignedUrl` with `transform`; limits and refusals; variants
 * follow a replaced object.
 */
import t from 'tap';
import { StorageClient } from '@supabase/storage-js';
import { randomUUID } from 'node:crypto';
import sharp from 'sharp';
import { startStorageApp, userToken } from './helpers.ts';

const jpeg = (w: number, h: number) => sharp({ create: { width: w, height: h, channels: 3, background: { r: 30, g: 120, b: 200 } } }).jpeg().toBuffer();
const decode = async (r: Response) => {
  const b = Buffer.from(await r.arrayBuffer());
  const m = await sharp(b).metadata();
  return { width: m.width, height: m.height, format: m.format };
};

t.test('image transformations', async (t) => {
  const app = await startStorageApp(t, 'database');
  const url = `${app.url}/storage/v1`;
  const admin = new StorageClient(url, { apikey: app.serviceKey, Authorization: `Bearer ${app.serviceKey}` });
  const aliceToken = await userToken(randomUUID());
  const alice = new StorageClient(url, { apikey: app.anonKey, Authorization: `Bearer ${aliceToken}` });
  t.same((await admin.createBucket('img', { public: false })).error, null);
  t.same((await admin.createBucket('pub', { public: true })).error, null);
  const photo = await jpeg(1600, 1200);
  t.same((await alice.from('img').upload('a/photo.jpg', photo, { contentType: 'image/jpeg' })).error, null);
  t.same((await admin.from('pub').upload('p.png', await sharp(photo).png().toBuffer(), { contentType: 'image/png' })).error, null);
  const auth = { authorization: `Bearer ${aliceToken}` };
  const render = (q: string, path = 'img/a/photo.jpg', headers: Record<string, string> = auth) =>
    fetch(`${url}/render/image/authenticated/${path}?${q}`, { headers });

  let r = await render('width=64&height=64&format=webp');
  t.equal(r.status, 200);
  t.equal(r.headers.get('content-type'), 'image/webp');
  t.same(await decode(r), { width: 64, height: 64, format: 'webp' }, 'cover 64x64 as WebP');
  r = await render('width=200&height=100&resize=contain');
  t.same(await decode(r), { width: 133, height: 100, format: 'jpeg' }, 'contain fits inside the box, no padding, format kept');
  r = await render('width=200&height=100&resize=fill&format=avif&quality=50');
  t.same(await decode(r), { width: 200, height: 100, format: 'heif' }, 'fill stretches; AVIF');
  r = await render('width=320');
  t.same(await decode(r), { width: 320, height: 240, format: 'jpeg' }, 'one side keeps the aspect');
  const first = await render('width=64&height=64&format=webp');
  const etag = first.headers.get('etag')!;
  await first.arrayBuffer();
  r = await render('width=64&height=64&format=webp', undefined, { ...auth, 'if-none-match': etag });
  t.equal(r.status, 304, 'a cached variant revalidates by ETag');

  // storage-js
  const dl = await alice.from('img').download('a/photo.jpg', { transform: { width: 100, height: 100, format: 'webp' } as never });
  const dlMeta = await sharp(Buffer.from(await dl.data!.arrayBuffer())).metadata();
  t.same([dlMeta.width, dlMeta.height, dlMeta.format], [100, 100, 'webp'], 'storage-js download with transform');
  const pubUrl = admin.from('pub').getPublicUrl('p.png', { transform: { width: 50, height: 40, resize: 'fill' } }).data.publicUrl;
  t.same(await decode(await fetch(pubUrl)), { width: 50, height: 40, format: 'png' }, 'storage-js getPublicUrl with transform, no credentials');
  const signed = await alice.from('img').createSignedUrl('a/photo.jpg', 60, { transform: { width: 80, height: 60 } });
  t.match(signed.data?.signedUrl, /\/render\/image\/sign\/img\/a\/photo\.jpg\?token=/);
  t.same(await decode(await fetch(signed.data!.signedUrl)), { width: 80, height: 60, format: 'jpeg' }, 'a signed rendition');
  const tampered = await fetch(signed.data!.signedUrl.replace('/render/image/sign/img/a/photo.jpg', '/render/image/sign/pub/p.png'));
  t.same([tampered.status, await tampered.json()], [400, { error: 'invalid signature' }], 'a signed rendition serves its own path only');

  // refusals
  const body = async (res: Response) => [res.status, await res.json()];
  t.same(await body(await render('width=3000')), [400, { error: 'invalid transformation' }], 'over 2500 px');
  t.same(await body(await render('quality=10')), [400, { error: 'invalid transformation' }], 'quality under 20');
  t.same(await body(await render('resize=crop')), [400, { error: 'invalid transformation' }]);
  t.same((await alice.from('img').upload('note.txt', Buffer.from('hi'), { contentType: 'text/plain' })).error, null);
  t.same(await body(await render('width=10', 'img/note.txt')), [415, { error: 'image format not supported' }], 'not an image type');
  t.same((await alice.from('img').upload('fake.png', Buffer.from('not a png'), { contentType: 'image/png' })).error, null);
  t.same(await body(await render('width=10', 'img/fake.png')), [415, { error: 'image format not supported' }], 'an image type that is not an image');
  const bob = await userToken();
  t.same(await body(await render('width=10', undefined, { authorization: `Bearer ${bob}` })), [404, { error: 'object not found' }], 'no transform of a file the caller could not download');
  t.same(await body(await fetch(`${url}/render/image/public/img/a/photo.jpg?width=10`)), [404, { error: 'bucket not found' }], 'no public rendition of a private bucket');

  // a replaced object: its variants follow
  t.same((await alice.from('img').upload('a/photo.jpg', await jpeg(400, 800), { contentType: 'image/jpeg', upsert: true })).error, null);
  t.same(await decode(await render('width=100')), { width: 100, height: 200, format: 'jpeg' }, 'the new object, not the cached variant of the old');
  const big = Buffer.alloc(26 * 1024 * 1024, 1);
  t.same((await admin.from('pub').upload('big.png', big, { contentType: 'image/png' })).error, null);
  t.same(await body(await fetch(`${url}/render/image/public/pub/big.png?width=10`)), [413, { error: 'image too large to transform' }], 'a source over 25 MB');

  const off = await startStorageApp(t, 'database', { IMAGE_TRANSFORMATION_ENABLED: 'false' });
  const res = await fetch(`${off.url}/storage/v1/render/image/public/pub/p.png?width=10`);
  t.same([res.status, await res.json()], [400, { error: 'image transformation is disabled' }], 'off with IMAGE_TRANSFORMATION_ENABLED=false');
});
