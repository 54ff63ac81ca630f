/**
 * Downloads racing overwrites and deletes of the same object, on every back end: a GET
 * gives the old bytes or the new ones (or 404 once the object is deleted), never an error,
 * and the service logs no error meanwhile. Image renditions the same, on the database back end.
 */
import sharp from 'sharp';
import t from 'tap';
import { captureLog } from '../helpers/log-capture.ts';
import { startStorageApp, type BackendName } from './helpers.ts';

const ROUNDS = 40;
const READERS = 3;
const SIZES = [16 * 1024, 600 * 1024]; // one chunk of the database back end, and two

for (const backend of ['database', 'disk', 's3'] as BackendName[]) {
  t.test(backend, async (t) => {
    const captured = captureLog('warn');
    const app = await startStorageApp(t, backend, { DB_POOL_SIZE: '4' }, { log: captured.log });
    const service = { apikey: app.serviceKey, authorization: `Bearer ${app.serviceKey}` };
    const bucket = await app.call('POST', '/storage/v1/bucket', { body: { id: 'race' }, headers: service });
    t.equal(bucket.status, 201);

    for (const size of SIZES) {
      const versions = [Buffer.alloc(size, 1), Buffer.alloc(size, 2)];
      const path = `/storage/v1/object/race/o-${size}.bin`;
      const put = async (body: Buffer) => {
        const r = await app.fetch(path, { method: 'PUT', headers: { ...service, 'content-type': 'application/octet-stream', 'x-upsert': 'true' }, body: new Uint8Array(body) });
        return { status: r.status, text: await r.text() };
      };
      const get = async () => {
        const r = await app.fetch(path, { headers: service });
        return { status: r.status, body: Buffer.from(await r.arrayBuffer()) };
      };
      t.equal((await put(versions[0])).status, 200);

      const wrong: string[] = [];
      let served = 0;
      // Every round one write (an upsert of the other version, or every tenth a delete) and
      // READERS downloads at once.
      for (let i = 0; i < ROUNDS; i++) {
        const deleting = i % 10 === 9;
        const write = deleting
          ? app.fetch(path, { method: 'DELETE', headers: service }).then(async (r) => ({ status: r.status, text: await r.text() }))
          : put(versions[(i + 1) % 2]);
        const reads = await Promise.all(Array.from({ length: READERS }, get));
        const w = await write;
        if (w.status !== 200) wrong.push(`round ${i}: ${deleting ? 'DELETE' : 'PUT'} → ${w.status} ${w.text}`);
        for (const r of reads) {
          if (r.status === 404 && deleting) continue;
          if (r.status !== 200) wrong.push(`round ${i}: GET → ${r.status} ${r.body.toString('utf8').slice(0, 100)}`);
          else if (!versions.some((v) => v.equals(r.body))) wrong.push(`round ${i}: GET → 200 with ${r.body.length} bytes of neither version`);
          else served++;
        }
        if (deleting) t.equal((await put(versions[0])).status, 200, 'uploaded again after the delete');
      }
      t.same(wrong, [], `${size} bytes: every GET gave a whole version (or 404 after a delete)`);
      t.ok(served > 0, `${size} bytes: GETs were served`);
    }
    const errors = captured.lines.filter((l) => Number(l.level) >= 50);
    t.same(
      errors.map((l) => JSON.stringify({ msg: l.msg, err: l.err }).slice(0, 400)),
      [],
      'no error logged',
    );
  });
}

t.test('image renditions racing overwrites (database)', async (t) => {
  const captured = captureLog('warn');
  const app = await startStorageApp(t, 'database', { DB_POOL_SIZE: '4' }, { log: captured.log });
  const service = { apikey: app.serviceKey, authorization: `Bearer ${app.serviceKey}` };
  t.equal((await app.call('POST', '/storage/v1/bucket', { body: { id: 'race' }, headers: service })).status, 201);
  const image = (r: number) => sharp({ create: { width: 64, height: 48, channels: 3, background: { r, g: 100, b: 100 } } }).jpeg().toBuffer();
  const versions = [await image(10), await image(240)];
  const put = async (body: Buffer) => {
    const r = await app.fetch('/storage/v1/object/race/p.jpg', { method: 'PUT', headers: { ...service, 'content-type': 'image/jpeg', 'x-upsert': 'true' }, body: new Uint8Array(body) });
    return `PUT → ${r.status} ${await r.text()}`;
  };
  t.match(await put(versions[0]), /^PUT → 200 /, 'uploaded');
  const wrong: string[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const write = put(versions[(i + 1) % 2]);
    const reads = await Promise.all(
      Array.from({ length: READERS }, async () => {
        const r = await app.fetch('/storage/v1/render/image/authenticated/race/p.jpg?width=32', { headers: service });
        const b = Buffer.from(await r.arrayBuffer());
        return r.status === 200 ? null : `GET → ${r.status} ${b.toString('utf8').slice(0, 100)}`;
      }),
    );
    const w = await write;
    if (!w.startsWith('PUT → 200')) wrong.push(`round ${i}: ${w}`);
    for (const r of reads) if (r !== null) wrong.push(`round ${i}: ${r}`);
  }
  t.same(wrong, [], 'every rendition was served');
  t.same(captured.lines.filter((l) => Number(l.level) >= 50).map((l) => JSON.stringify({ msg: l.msg, err: l.err }).slice(0, 400)), [], 'no error logged');
});
