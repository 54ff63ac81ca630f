/** The storage suite (suite.ts) on the `database` back end, and its chunk sizes. */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import t from 'tap';
import { CHUNK_BYTES } from '../../src/storage/backends/database.ts';
import { startStorageApp, userToken } from './helpers.ts';
import { storageSuite } from './suite.ts';

storageSuite(t, 'database');

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const KiB = 1024;

t.test('chunk sizes: new objects in CHUNK_BYTES, objects stored in 512 KiB chunks read and ranged as they are', async (t) => {
  const app = await startStorageApp(t, 'database');
  const alice = await userToken(randomUUID());
  const r = await app.call('POST', '/storage/v1/bucket', { token: app.serviceKey, body: { id: 'c', file_size_limit: 64 * 1024 * KiB } });
  t.equal(r.status, 201);
  const get = async (path: string, range?: string) => {
    const res = await app.fetch(`/storage/v1/object/c/${path}`, { headers: { authorization: `Bearer ${alice}`, ...(range ? { range } : {}) } });
    return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
  };
  const put = async (path: string, body: Buffer) => {
    const res = await app.fetch(`/storage/v1/object/c/${path}`, { method: 'POST', headers: { authorization: `Bearer ${alice}` }, body: new Uint8Array(body) });
    await res.arrayBuffer();
    return res.status;
  };
  // Several download windows (more than 8 MiB) and a last chunk that is shorter.
  const bytes = randomBytes(4 * CHUNK_BYTES + 12_345);
  t.equal(await put('new.bin', bytes), 200);
  const [{ id }] = await app.db.sql<{ id: string }[]>`select id::text from storage.objects where name = 'new.bin'`;
  const lengths = await app.db.sql<{ n: number }[]>`select octet_length(data) as n from storage_private.chunks where object_id = ${id}::uuid order by seq`;
  t.same(lengths.map((l) => l.n), [CHUNK_BYTES, CHUNK_BYTES, CHUNK_BYTES, CHUNK_BYTES, 12_345], 'a new object is stored in chunks of CHUNK_BYTES');

  // An object stored before: its bytes cut again into 512 KiB chunks, as older versions wrote them.
  const old = randomBytes(3 * 512 * KiB + 777);
  t.equal(await put('old.bin', old), 200);
  const [{ id: oldId }] = await app.db.sql<{ id: string }[]>`select id::text from storage.objects where name = 'old.bin'`;
  await app.db.sql.begin(async (tx) => {
    await tx`delete from storage_private.chunks where object_id = ${oldId}::uuid`;
    for (let seq = 0; seq * 512 * KiB < old.length; seq++) {
      await tx`insert into storage_private.chunks (object_id, seq, data) values (${oldId}::uuid, ${seq}, ${old.subarray(seq * 512 * KiB, (seq + 1) * 512 * KiB)})`;
    }
  });
  const [{ n }] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from storage_private.chunks where object_id = ${oldId}::uuid`;
  t.equal(n, 4, 'the older object is in 512 KiB chunks');

  for (const [name, b] of [['new.bin', bytes], ['old.bin', old]] as const) {
    const whole = await get(name);
    t.equal(whole.status, 200);
    t.equal(sha256(whole.body), sha256(b), `${name}: whole`);
    for (const [start, end] of [
      [0, 0],
      [512 * KiB - 10, 512 * KiB + 10],
      [CHUNK_BYTES - 1, CHUNK_BYTES],
      [b.length - 100, b.length - 1],
      [700 * KiB, Math.min(b.length - 1, 2 * CHUNK_BYTES + 5)],
      [100, b.length - 1],
    ] as const) {
      if (end >= b.length || start > end) continue;
      const res = await get(name, `bytes=${start}-${end}`);
      t.equal(res.status, 206);
      t.ok(res.body.equals(b.subarray(start, end + 1)), `${name}: bytes ${start}-${end}`);
    }
  }
});
