/** The storage settings: the back end, image renders, and the S3 store (also used by backups to S3). */
import { join, resolve } from 'node:path';
import { ConfigError, bool, int, str, url, type Env } from './read.ts';

export interface S3Config {
  /** Unset: AWS's own endpoint for the region. */
  endpoint: string | null;
  bucket: string;
  region: string;
  /** Unset: the AWS SDK's default credential chain. */
  accessKeyId: string | null;
  secretAccessKey: string | null;
  forcePathStyle: boolean;
}

/** The S3 settings, read when `requiredBy` (the setting that needs them) is not null. */
function s3Config(env: Env, requiredBy: string | null): S3Config | null {
  const endpoint = url(env, 'S3_ENDPOINT') ?? null;
  const bucket = str(env, 'S3_BUCKET');
  const accessKeyId = str(env, 'S3_ACCESS_KEY_ID') ?? null;
  const secretAccessKey = str(env, 'S3_SECRET_ACCESS_KEY') ?? null;
  const forcePathStyle = bool(env, 'S3_FORCE_PATH_STYLE', false);
  const region = str(env, 'S3_REGION') ?? 'us-east-1';
  if (requiredBy === null) return null;
  if (bucket === undefined) throw new ConfigError('S3_BUCKET', `is required when ${requiredBy}`);
  if ((accessKeyId === null) !== (secretAccessKey === null)) {
    throw new ConfigError(accessKeyId === null ? 'S3_ACCESS_KEY_ID' : 'S3_SECRET_ACCESS_KEY', 'must be set together with its pair');
  }
  return Object.freeze({ endpoint, bucket, region, accessKeyId, secretAccessKey, forcePathStyle });
}

function storageBackend(env: Env): 'database' | 'disk' | 's3' {
  const v = str(env, 'STORAGE_BACKEND') ?? 'database';
  if (v !== 'database' && v !== 'disk' && v !== 's3') throw new ConfigError('STORAGE_BACKEND', 'must be database, disk or s3');
  return v;
}

export function storageSettings(env: Env, dataDir: string) {
  const backend = storageBackend(env);
  return {
    storageBackend: backend,
    storageDir: resolve(str(env, 'STORAGE_DIR') ?? join(dataDir, 'storage')),
    imageTransformation: bool(env, 'IMAGE_TRANSFORMATION_ENABLED', true),
    imageMaxPixels: int(env, 'IMAGE_MAX_PIXELS', 25_000_000, 1, 1_000_000_000),
    imageRenderConcurrency: int(env, 'IMAGE_RENDER_CONCURRENCY', 1, 1, 64),
    s3: s3Config(env, backend === 's3' ? 'STORAGE_BACKEND=s3' : str(env, 'BACKUP_S3_PREFIX') !== undefined ? 'BACKUP_S3_PREFIX is set' : null),
  };
}
