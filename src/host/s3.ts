/**
 * The S3 client of plinth's configuration (S3_*), made once at the start: for the storage back
 * end (src/storage/backends/s3.ts) and the backups to S3 (backup-s3.ts).
 */
import { S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import type { S3Config } from '../core/config.ts';

/** The multipart part size of uploads (S3's minimum): a body that fits one part goes as one PutObject. */
export const PART_BYTES = 5 * 1024 * 1024;

export function s3Client(cfg: S3Config): S3Client {
  const opts: S3ClientConfig = {
    region: cfg.region,
    forcePathStyle: cfg.forcePathStyle,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  };
  if (cfg.endpoint) opts.endpoint = cfg.endpoint;
  if (cfg.accessKeyId && cfg.secretAccessKey) {
    opts.credentials = { accessKeyId: cfg.accessKeyId, secretAccessKey: cfg.secretAccessKey };
  }
  return new S3Client(opts);
}
