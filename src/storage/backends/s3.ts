/**
 * The `s3` back end: any S3-compatible store through the official AWS SDK, for
 * deployments past one machine. Keys are `<bucket>/<object path>/<object id>` in S3_BUCKET.
 *
 * Uploads stream with `@aws-sdk/lib-storage`'s `Upload` (multipart in 5 MiB parts, two in
 * flight, so at most ~10 MiB of an upload is in memory); a body that fits one part goes as
 * one PutObject of a buffer, which also avoids the chunked upload framing that some
 * S3-compatible servers (s3rver 3.7) store as part of the object. The key carries the new
 * object id, so nothing reaches it before the metadata commits; `abort` deletes it.
 */
import { DeleteObjectCommand, GetObjectCommand } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { Readable } from 'node:stream';
import type { S3Config } from '../../core/config.ts';
import { PART_BYTES, s3Client } from '../../host/s3.ts';
import type { Backend, ByteRange, ObjectAddress, PendingPut } from './backend.ts';

export function s3Backend(cfg: S3Config): Backend {
  const client = s3Client(cfg);
  const key = (obj: ObjectAddress) => `${obj.bucket}/${obj.name}/${obj.id}`;
  const remove = async (obj: ObjectAddress) => {
    await client.send(new DeleteObjectCommand({ Bucket: cfg.bucket, Key: key(obj) }));
  };

  return {
    name: 's3',

    async put(_tx, obj, body, mimeType): Promise<PendingPut> {
      const upload = new Upload({
        client,
        params: { Bucket: cfg.bucket, Key: key(obj), Body: body, ContentType: mimeType },
        queueSize: 2,
        partSize: PART_BYTES,
        leavePartsOnError: false,
      });
      try {
        await upload.done();
      } catch (err) {
        await remove(obj).catch(() => {});
        throw err;
      }
      return {
        commit: async () => {},
        abort: () => remove(obj),
      };
    },

    async get(obj: ObjectAddress, _size: number, range: ByteRange | null): Promise<Readable | null> {
      try {
        const out = await client.send(
          new GetObjectCommand({ Bucket: cfg.bucket, Key: key(obj), Range: range ? `bytes=${range.start}-${range.end}` : undefined }),
        );
        return out.Body as Readable;
      } catch (err) {
        if ((err as { name?: string }).name === 'NoSuchKey') return null;
        throw err;
      }
    },

    delete: remove,

    async close() {
      client.destroy();
    },
  };
}
