/**
 * Image renders an attacker chooses the cost of: a source is rendered only when its bytes
 * are JPEG, PNG, WebP, AVIF or GIF (an SVG or TIFF named `.png` is refused at once, whatever
 * its stored type), when its header names at most IMAGE_MAX_PIXELS pixels, while fewer than
 * the instance's cap of renders run and wait (503 with Retry-After past it), and while the
 * object has fewer than its cap of variants. Real HTTP, real sharp.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { crc32, deflateSync } from 'node:zlib';
import sharp from 'sharp';
import { startStorageApp, userToken } from './helpers.ts';

const png = (w: number, h: number) => sharp({ create: { width: w, height: h, channels: 3, background: { r: 200, g: 40, b: 90 } } }).png().toBuffer();

/** A PNG of a signature, a header naming `w`×`h`, a few bytes of pixel data and an end: what a decoder reads first is all there is. */
function pngHeaderOnly(w: number, h: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(td) >>> 0);
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(Buffer.alloc(64))), chunk('IEND', Buffer.alloc(0))]);
}

/** Status and JSON body, or the size of a body that is not JSON (an image rendered after all). */
const body = async (res: Response) => {
  const b = Buffer.from(await res.arrayBuffer());
  try {
    return [res.status, JSON.parse(b.toString('utf8'))];
  } catch {
    return [res.status, `${b.length} bytes of ${res.headers.get('content-type')}`];
  }
};

t.test('render refusals decided by the bytes', async (t) => {
  const app = await startStorageApp(t, 'database');
  const url = `${app.url}/storage/v1`;
  const token = await userToken(randomUUID());
  const auth = { authorization: `Bearer ${token}` };
  const make = await fetch(`${url}/bucket`, { method: 'POST', headers: { authorization: `Bearer ${app.serviceKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ id: 'pics', public: true }) });
  t.equal(make.status, 201);
  const upload = async (name: string, bytes: Buffer, type: string) => {
    const r = await fetch(`${url}/object/pics/${name}`, { method: 'POST', headers: { ...auth, 'content-type': type }, body: new Uint8Array(bytes) });
    t.equal(r.status, 200, `upload ${name}`);
  };
  const render = (name: string, q: string) => fetch(`${url}/render/image/public/pics/${name}?${q}`);

  // The reported attack: a few hundred bytes of SVG named v.png, rendered by anyone.
  const svg = Buffer.from(
    '<svg xmlns="http://www.w3.org/2000/svg" width="400" height="400"><filter id="f"><feGaussianBlur stdDeviation="90"/></filter><rect width="400" height="400" fill="red" filter="url(#f)"/></svg>',
  );
  await upload('v.png', svg, 'image/svg+xml');
  t.same(await body(await render('v.png', 'width=300')), [415, { error: 'image format not supported' }], 'an SVG named .png is not rendered');
  await upload('w.png', svg, 'image/png');
  t.same(await body(await render('w.png', 'width=300')), [415, { error: 'image format not supported' }], 'an SVG declared image/png is not rendered');
  const tiff = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#123456' } }).tiff().toBuffer();
  await upload('t.jpg', tiff, 'image/jpeg');
  t.same(await body(await render('t.jpg', 'width=32')), [415, { error: 'image format not supported' }], 'a TIFF declared image/jpeg is not rendered');

  // Header over the default 25 megapixels: refused before any pixel is decoded.
  await upload('huge.png', pngHeaderOnly(6000, 5000), 'image/png');
  t.same(await body(await render('huge.png', 'width=100')), [413, { error: 'image too large to transform' }], '30 MP by its header: 413');
  await upload('bomb.png', pngHeaderOnly(100_000, 100_000), 'image/png');
  t.same(await body(await render('bomb.png', 'width=100')), [413, { error: 'image too large to transform' }], '10 gigapixels by its header: 413');

  // What the bytes are decides the output of format=origin, whatever the stored type says.
  const real = await png(120, 80);
  await upload('real.jpg', real, 'image/jpeg');
  const ok = await render('real.jpg', 'width=60');
  t.equal(ok.status, 200, 'a PNG stored as image/jpeg renders');
  t.equal(ok.headers.get('content-type'), 'image/png', 'as the PNG its bytes are');
  const m = await sharp(Buffer.from(await ok.arrayBuffer())).metadata();
  t.same([m.format, m.width, m.height], ['png', 60, 40]);

  // Variants per object are capped: a fresh size past the cap is refused, cached ones still serve.
  await upload('many.png', await png(64, 64), 'image/png');
  const statuses: number[] = [];
  for (let w = 1; w <= 32; w++) {
    const r = await render('many.png', `width=${w}`);
    await r.arrayBuffer();
    statuses.push(r.status);
  }
  t.same(new Set(statuses), new Set([200]), '32 variants of one object render');
  t.same(await body(await render('many.png', 'width=33')), [400, { error: 'too many variants of this image' }], 'the 33rd is refused');
  const cached = await render('many.png', 'width=7');
  await cached.arrayBuffer();
  t.equal(cached.status, 200, 'a variant already made still serves');
});

t.test('IMAGE_MAX_PIXELS and the cap on renders at once', async (t) => {
  const app = await startStorageApp(t, 'database', { IMAGE_MAX_PIXELS: '4000000', IMAGE_RENDER_CONCURRENCY: '1' });
  const url = `${app.url}/storage/v1`;
  const make = await fetch(`${url}/bucket`, { method: 'POST', headers: { authorization: `Bearer ${app.serviceKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ id: 'pics', public: true }) });
  t.equal(make.status, 201);
  const admin = { authorization: `Bearer ${app.serviceKey}` };
  const upload = async (name: string, bytes: Buffer) => {
    const r = await fetch(`${url}/object/pics/${name}`, { method: 'POST', headers: { ...admin, 'content-type': 'image/png' }, body: new Uint8Array(bytes) });
    t.equal(r.status, 200, `upload ${name}`);
  };
  await upload('over.png', await png(2100, 2000));
  t.same(await body(await fetch(`${url}/render/image/public/pics/over.png?width=10`)), [413, { error: 'image too large to transform' }], '4.2 MP over IMAGE_MAX_PIXELS=4000000');

  // 2000x2000 of a pattern (each render decodes 4 MP); fresh variants fired at once, spread
  // over objects (each has a cap of variants), until the instance answers 503.
  const w = 2000;
  const raw = Buffer.alloc(w * w * 3);
  for (let i = 0; i < raw.length; i++) raw[i] = (i * 7) & 0xff;
  const heavy = await sharp(raw, { raw: { width: w, height: w, channels: 3 } }).png({ compressionLevel: 1 }).toBuffer();
  let busy: Response | null = null;
  const deadline = Date.now() + 60_000;
  for (let round = 0; busy === null && Date.now() < deadline; round++) {
    const names = [`h${round}a.png`, `h${round}b.png`];
    for (const n of names) await upload(n, heavy);
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => fetch(`${url}/render/image/public/pics/${names[i % 2]}?width=${100 + i}&format=webp`)));
    for (const r of answers) {
      if (r.status === 503 && busy === null) busy = r;
      else await r.arrayBuffer();
    }
    t.ok(answers.every((r) => r.status === 200 || r.status === 503), `round ${round}: each render is made or refused as busy`);
  }
  t.ok(busy, 'renders past the cap are answered 503');
  if (busy) {
    t.same(await busy.json(), { error: 'too many image renders in progress' });
    t.match(busy.headers.get('retry-after'), /^\d+$/, 'with Retry-After');
  }
});
