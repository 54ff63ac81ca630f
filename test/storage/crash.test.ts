/**
 * The disk back end under `kill -9`: a real plinth process (node src/main.ts) is killed
 * while uploads stream, several times over, and started again on the same STORAGE_DIR.
 * After every restart: no object row without its bytes (every listed object downloads,
 * byte for byte), every acknowledged upload is there, and the sweep at start has removed
 * every file no row names — temporary files of cut-off uploads, and placed files of
 * transactions that never committed — but not the file of an upload still in progress
 * (another instance's, simulated here by a transaction that holds the upload's lock).
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseConfig, resolveSecrets } from '../../src/core/config.ts';
import { TEST_JWT_SECRET } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { filesUnder, until } from './helpers.ts';
import { freePort } from '../helpers/ports.ts';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const KILLS = 3;


/** The bytes of object `name`: derived from the name, so any copy can be checked. */
function content(name: string): Buffer {
  const n = 200 + (createHash('sha1').update(name).digest()[0] << 6);
  const seed = createHash('sha256').update(name).digest();
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i++) out[i] = seed[i % 32] ^ (i & 0xff);
  return out;
}

t.test('kill -9 during uploads leaves no row without its bytes, and the sweep leaves no stray file', { timeout: 240_000 }, async (t) => {
  const db = await createTestDatabase(t);
  const dir = mkdtempSync(join(tmpdir(), 'plinth-crash-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const storageDir = join(dir, 'files');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = {
    PATH: process.env.PATH ?? '',
    DATABASE_URL: db.url,
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: join(dir, 'data'),
    JWT_SECRET: TEST_JWT_SECRET,
    STORAGE_BACKEND: 'disk',
    STORAGE_DIR: storageDir,
    DB_POOL_SIZE: '4',
    LOG_LEVEL: 'info',
  };
  const { serviceRoleKey: svc } = await resolveSecrets(parseConfig(env));
  const auth = { authorization: `Bearer ${svc}` };

  let child: ChildProcess | null = null;
  let out = '';
  t.teardown(() => void child?.kill('SIGKILL'));
  const start = async () => {
    out = '';
    child = spawn(process.execPath, [MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    await until(
      async () => {
        if (child!.exitCode !== null) throw new Error(`plinth exited: ${out}`);
        return fetch(`${base}/health`).then((r) => r.ok, () => false);
      },
      'plinth to answer',
      60_000,
    );
  };
  const kill = async () => {
    const c = child!;
    const gone = new Promise<void>((resolve) => c.once('exit', () => resolve()));
    c.kill('SIGKILL');
    await gone;
    child = null;
  };

  const tmpFiles = () => (existsSync(join(storageDir, '.tmp')) ? readdirSync(join(storageDir, '.tmp')) : []);
  /** Files under the bucket folder whose id no row names. */
  const strays = async () => {
    const files = filesUnder(join(storageDir, 'crash')).map((f) => f.split('/').pop()!);
    if (files.length === 0) return [];
    const rows = await db.sql<{ id: string }[]>`select id::text from storage.objects where id = any(${files}::uuid[])`;
    const known = new Set(rows.map((r) => r.id));
    return files.filter((f) => !known.has(f));
  };

  await start();
  t.equal((await fetch(`${base}/storage/v1/bucket`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ id: 'crash' }) })).status, 201);

  const acknowledged = new Set<string>();
  let seq = 0;
  let leftoversSeen = 0;
  // An upload in progress elsewhere: its id's lock is held by an open transaction, its file placed.
  const heldId = randomUUID();
  const heldPath = join(storageDir, 'crash', 'elsewhere', heldId);
  const holder = await db.sql.reserve();
  t.teardown(() => holder.release());
  await holder`begin`;
  await holder`select pg_advisory_xact_lock_shared(1886155636, hashtext(${heldId}))`;

  for (let round = 0; round < KILLS; round++) {
    // A slow upload that is certain to be cut off mid-body: its temporary file must go.
    const slow = http.request(`${base}/storage/v1/object/crash/slow-${round}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/octet-stream', 'transfer-encoding': 'chunked' } });
    slow.on('error', () => {});
    slow.write(Buffer.alloc(64 * 1024, 1));
    // Its temporary file exists once it has its transaction (a connection of the pool): wait
    // for it before the small uploads compete for the pool, or the kill may find it queued.
    await until(() => tmpFiles().length > 0, 'the slow upload streaming', 60_000);
    // Many small uploads at once, until the kill.
    let stop = false;
    const workers = Array.from({ length: 12 }, async () => {
      while (!stop) {
        const name = `r${round}/o${seq++}`;
        try {
          const r = await fetch(`${base}/storage/v1/object/crash/${name}`, { method: 'POST', headers: { ...auth, 'content-type': 'application/octet-stream' }, body: new Uint8Array(content(name)) });
          await r.arrayBuffer();
          if (r.status === 200) acknowledged.add(name);
        } catch {
          // cut off by the kill: either absent or whole
        }
      }
    });
    await until(() => tmpFiles().length > 0 && acknowledged.size > round * 20 + 10, 'uploads under way', 60_000);
    await new Promise((r) => setImmediate(r));
    await kill();
    stop = true;
    slow.destroy();
    await Promise.all(workers);

    // What the crash left, before the restart sweeps it; plus a placed file of a transaction that never committed.
    const stray = join(storageDir, 'crash', `r${round}`, 'never-committed', randomUUID());
    mkdirSync(join(stray, '..'), { recursive: true });
    writeFileSync(stray, 'x');
    mkdirSync(join(heldPath, '..'), { recursive: true });
    writeFileSync(heldPath, 'in progress');
    t.ok(tmpFiles().length >= 1, `round ${round}: the cut-off upload left its temporary file`);
    leftoversSeen += tmpFiles().length + (await strays()).length;

    await start();
    await until(async () => tmpFiles().length === 0 && (await strays()).length === 1, 'the sweep at start', 60_000);
    t.same(await strays(), [heldId], `round ${round}: only the upload still in progress keeps its file`);

    // Every row has its bytes; every acknowledged upload is there.
    const rows = await db.sql<{ name: string }[]>`select name from storage.objects where bucket_id = 'crash'`;
    const names = new Set(rows.map((r) => r.name));
    const missing = [...acknowledged].filter((n) => !names.has(n));
    t.same(missing, [], `round ${round}: every acknowledged upload survived`);
    let bad = 0;
    for (const { name } of rows) {
      const r = await fetch(`${base}/storage/v1/object/crash/${name}`, { headers: auth });
      const body = Buffer.from(await r.arrayBuffer());
      if (r.status !== 200 || (!name.startsWith('slow-') && !body.equals(content(name)))) bad++;
    }
    t.equal(bad, 0, `round ${round}: all ${rows.length} listed objects download whole`);
  }
  t.ok(leftoversSeen > 0);
  await holder`rollback`;
  await kill();
});
