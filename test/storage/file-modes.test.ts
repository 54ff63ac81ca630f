/**
 * The disk back end keeps private objects private from other local users: what uploads,
 * resumable staging and image variants create is 0700 (folders) and 0600 (files) even
 * under an umask that takes nothing away, and a start tightens files an older version left
 * 0644 in folders 0755, under its own folders only (a symbolic link is not followed).
 * Real HTTP, real files.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { chmodSync, lstatSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { startApp } from '../helpers/app.ts';
import { startStorageApp, until, userToken } from './helpers.ts';

const mode = (p: string) => lstatSync(p).mode & 0o777;

/** Every folder and file under `dir` (itself included), with its mode. */
function modesUnder(dir: string): { path: string; dir: boolean; mode: number }[] {
  const out = [{ path: dir, dir: true, mode: mode(dir) }];
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const p = join(e.parentPath, e.name);
    out.push({ path: p, dir: e.isDirectory(), mode: mode(p) });
  }
  return out;
}

t.test('files made by uploads, resumable uploads and renders are 0600 in folders 0700', async (t) => {
  const before = process.umask(0); // nothing taken away: the modes must be asked for explicitly
  t.teardown(() => void process.umask(before));
  const app = await startStorageApp(t, 'disk');
  const root = app.root!;
  const dataDir = app.config.dataDir;
  const url = `${app.url}/storage/v1`;
  const token = await userToken(randomUUID());
  const auth = { authorization: `Bearer ${token}`, apikey: app.anonKey };
  const make = await fetch(`${url}/bucket`, { method: 'POST', headers: { authorization: `Bearer ${app.serviceKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ id: 'priv', public: false }) });
  t.equal(make.status, 201);

  // A plain upload, and an image rendered from it.
  const png = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#336699' } }).png().toBuffer();
  const up = await fetch(`${url}/object/priv/deep/er/pic.png`, { method: 'POST', headers: { ...auth, 'content-type': 'image/png' }, body: new Uint8Array(png) });
  t.equal(up.status, 200, 'uploaded');
  const r = await fetch(`${url}/render/image/authenticated/priv/deep/er/pic.png?width=20`, { headers: auth });
  t.equal(r.status, 200, 'rendered');
  await r.arrayBuffer();

  // A resumable upload: staged, half written, then finished.
  const tus = { ...auth, 'tus-resumable': '1.0.0' };
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const c = await fetch(`${url}/upload/resumable`, { method: 'POST', headers: { ...tus, 'upload-length': '10', 'upload-metadata': `bucketName ${b64('priv')},objectName ${b64('tus/file.bin')}` } });
  t.equal(c.status, 201, 'resumable upload created');
  const loc = `${app.url}${c.headers.get('location')}`;
  const patch = (offset: number, bytes: string) =>
    fetch(loc, { method: 'PATCH', headers: { ...tus, 'upload-offset': String(offset), 'content-type': 'application/offset+octet-stream' }, body: bytes });
  t.equal((await patch(0, '01234')).status, 204, 'first half');
  const staged = modesUnder(join(root, '.tus'));
  t.ok(staged.some((e) => !e.dir), 'a staged file is there');
  for (const e of staged) t.equal(e.mode.toString(8), e.dir ? '700' : '600', `staging: ${e.path.slice(root.length)}`);
  t.equal((await patch(5, '56789')).status, 204, 'second half');

  const stored = modesUnder(root);
  t.ok(stored.filter((e) => !e.dir).length >= 2, 'the placed files are there');
  for (const e of stored) t.equal(e.mode.toString(8), e.dir ? '700' : '600', `storage: ${e.path.slice(root.length) || '/'}`);
  const variants = modesUnder(join(dataDir, 'image-cache'));
  t.ok(variants.some((e) => !e.dir), 'a variant is there');
  for (const e of variants) t.equal(e.mode.toString(8), e.dir ? '700' : '600', `variants: ${e.path.slice(dataDir.length)}`);
});

t.test('a start tightens files an older version left readable, only its own', async (t) => {
  const parent = mkdtempSync(join(tmpdir(), 'plinth-modes-'));
  t.teardown(() => rmSync(parent, { recursive: true, force: true }));
  const env = { STORAGE_BACKEND: 'disk', STORAGE_DIR: join(parent, 'files'), DATA_DIR: join(parent, 'data') };
  const root = env.STORAGE_DIR;
  const cache = join(env.DATA_DIR, 'image-cache');
  // Objects and a variant as an instance writes them, then opened up as an older version left them.
  const first = await startApp(t, { env });
  const svc = { authorization: `Bearer ${first.serviceKey}` };
  const make = await first.fetch('/storage/v1/bucket', { method: 'POST', headers: { ...svc, 'content-type': 'application/json' }, body: JSON.stringify({ id: 'priv' }) });
  t.equal(make.status, 201);
  const png = await sharp({ create: { width: 40, height: 30, channels: 3, background: '#336699' } }).png().toBuffer();
  const up = await first.fetch('/storage/v1/object/priv/a/pic.png', { method: 'POST', headers: { ...svc, 'content-type': 'image/png' }, body: new Uint8Array(png) });
  t.equal(up.status, 200, 'uploaded');
  const r = await first.fetch('/storage/v1/render/image/authenticated/priv/a/pic.png?width=20', { headers: svc });
  t.equal(r.status, 200, 'rendered');
  await r.arrayBuffer();
  const outside = join(parent, 'outside.txt');
  writeFileSync(outside, 'not plinth\'s');
  chmodSync(outside, 0o644);
  symlinkSync(outside, join(root, 'priv', 'a', 'link'));
  const older = [...modesUnder(root), ...modesUnder(cache)].filter((e) => lstatSync(e.path).isDirectory() || lstatSync(e.path).isFile());
  for (const e of older) chmodSync(e.path, e.dir ? 0o755 : 0o644);
  t.ok(older.filter((e) => !e.dir).length >= 2, 'an object and a variant, 0644 in folders 0755');

  // A second instance starts on the same folders and database.
  await startApp(t, { env, db: first.db });
  await until(() => older.every((e) => mode(e.path) === (e.dir ? 0o700 : 0o600)), 'the older files and folders to be tightened', 10_000).catch(() => {});
  for (const e of older) t.equal(mode(e.path).toString(8), e.dir ? '700' : '600', `${e.dir ? 'folder' : 'file'} ${e.path.slice(parent.length)}`);
  t.equal(mode(outside).toString(8), '644', 'a file outside, reached by a symbolic link, is left alone');
  const read = await first.fetch('/storage/v1/object/authenticated/priv/a/pic.png', { headers: svc });
  t.equal(read.status, 200, 'the object still serves');
  t.same(Buffer.from(await read.arrayBuffer()), png);
});
