/**
 * The S3 store of the backups (BACKUP_S3_PREFIX): the layout of a BACKUP_DIR as objects
 * under the prefix in S3_BUCKET, through the storage area's client settings. Files that fit
 * one part go as one PutObject of a buffer; larger ones (WAL segments, big tables) stream as
 * a multipart upload, so memory stays bounded. Loaded only when BACKUP_S3_PREFIX is set.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, open, readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsCommand, PutObjectCommand, type _Object } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { S3Config } from '../core/config.ts';
import { PART_BYTES, s3Client } from './s3.ts';
import { eachLimit, type BackupStore } from './backup-store.ts';

const PARALLEL = 8;
const isGone = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

export function s3Store(cfg: S3Config, prefix: string): BackupStore {
  const client = s3Client(cfg);
  const Bucket = cfg.bucket;

  /**
   * Every object under `p` (full keys), or with a delimiter the names of the "folders" under
   * it. ListObjects with markers, not ListObjectsV2: s3rver cannot make V2's continuation
   * tokens on Node 24 (DES), and every S3 serves both.
   */
  const list = async (p: string, delimiter?: string): Promise<{ objects: _Object[]; folders: string[] }> => {
    const objects: _Object[] = [];
    const folders: string[] = [];
    let Marker: string | undefined;
    for (;;) {
      const page = await client.send(new ListObjectsCommand({ Bucket, Prefix: p, Delimiter: delimiter, Marker }));
      objects.push(...(page.Contents ?? []));
      for (const cp of page.CommonPrefixes ?? []) if (cp.Prefix) folders.push(cp.Prefix.slice(p.length).replace(/\/$/, ''));
      const next = page.NextMarker ?? page.Contents?.at(-1)?.Key;
      if (!page.IsTruncated || next === undefined) break;
      Marker = next;
    }
    return { objects, folders };
  };
  const download = async (key: string, to: string) => {
    const out = await client.send(new GetObjectCommand({ Bucket, Key: key }));
    await mkdir(dirname(to), { recursive: true, mode: 0o700 });
    await pipeline(out.Body as Readable, createWriteStream(to, { mode: 0o600 }));
  };

  return {
    where: `s3://${Bucket}/${prefix}`,
    localWal: null,
    backups: async () => (await list(`${prefix}base/`, '/')).folders,
    async segments() {
      const { objects } = await list(`${prefix}wal/`);
      return objects.map((o) => ({ name: o.Key!.slice(prefix.length + 4), stored: o.LastModified?.getTime() ?? 0, bytes: o.Size ?? 0 }));
    },
    async bytes(key) {
      return (await list(prefix + key)).objects.reduce((n, o) => n + (o.Size ?? 0), 0);
    },
    async read(key) {
      try {
        const out = await client.send(new GetObjectCommand({ Bucket, Key: prefix + key }));
        return await out.Body!.transformToString();
      } catch (err) {
        if ((err as { name?: string }).name === 'NoSuchKey') return null;
        throw err;
      }
    },
    async write(key, text) {
      await client.send(new PutObjectCommand({ Bucket, Key: prefix + key, Body: Buffer.from(text) }));
    },
    async putFile(key, path) {
      try {
        if ((await stat(path)).size <= PART_BYTES) {
          await client.send(new PutObjectCommand({ Bucket, Key: prefix + key, Body: await readFile(path) }));
          return true;
        }
        const file = await open(path);
        try {
          await new Upload({ client, params: { Bucket, Key: prefix + key, Body: file.createReadStream({ autoClose: false }) }, queueSize: 2, partSize: PART_BYTES, leavePartsOnError: false }).done();
        } finally {
          await file.close();
        }
        return true;
      } catch (err) {
        if (isGone(err)) return false;
        throw err;
      }
    },
    async remove(key) {
      const keys = key.endsWith('/') ? (await list(prefix + key)).objects.map((o) => o.Key!) : [prefix + key];
      await eachLimit(keys, PARALLEL, (Key) => client.send(new DeleteObjectCommand({ Bucket, Key })));
    },
    async fetchTree(key, into) {
      if (!key.endsWith('/')) return download(prefix + key, into);
      const { objects } = await list(prefix + key);
      await eachLimit(objects, PARALLEL, (o) => download(o.Key!, join(into, o.Key!.slice(prefix.length + key.length))));
    },
    async close() {
      client.destroy();
    },
  };
}
