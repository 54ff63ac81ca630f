/**
 * Object paths and bucket ids, validated once, from the request line as received, before
 * any back end is touched (docs/api/storage.md).
 *
 * The raw path after the route prefix is percent-decoded once and split on `/`. Refused
 * with 400 `invalid object path`: a malformed escape, an empty segment (which covers
 * absolute paths `//etc`, UNC paths `//host/share` and trailing slashes), `.` or `..`
 * (raw or percent-encoded, also via `%2f`), a backslash, a drive letter (`C:`), NUL and
 * every other control byte, a segment over 255 bytes or a path over 1024 bytes.
 */
import { AppError } from '../core/errors.ts';

export const invalidObjectPath = () => new AppError(400, 'invalid object path');
export const invalidBucketId = () => new AppError(400, 'invalid bucket id');

// eslint-disable-next-line no-control-regex -- refusing control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;
const DRIVE = /^[A-Za-z]:/;
const MAX_SEGMENT_BYTES = 255;
const MAX_PATH_BYTES = 1024;

function decode(raw: string): string | null {
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

function segmentOk(seg: string): boolean {
  return (
    seg !== '' &&
    seg !== '.' &&
    seg !== '..' &&
    !seg.includes('\\') &&
    !CONTROL.test(seg) &&
    Buffer.byteLength(seg) <= MAX_SEGMENT_BYTES
  );
}

/** A bucket id (decoded): one safe segment without `:` and without a leading dot (the disk back end's `.tmp`). */
export function bucketIdOk(id: string): boolean {
  return segmentOk(id) && !id.startsWith('.') && !id.includes('/') && !id.includes(':') && id.length <= 100;
}

/** A decoded object name: safe segments joined by `/`, no drive letter. */
export function objectNameOk(name: string): boolean {
  if (name === '' || Buffer.byteLength(name) > MAX_PATH_BYTES || DRIVE.test(name)) return false;
  return name.split('/').every(segmentOk);
}

/** The raw path of a request URL, without its query string. */
export function rawPath(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/**
 * `<bucket>/<object path>` from the raw request path after `prefix` (e.g.
 * `/storage/v1/object/`). Throws 400 `invalid object path`.
 */
export function parseObjectPath(url: string, prefix: string): { bucket: string; name: string } {
  const path = rawPath(url);
  if (!path.startsWith(prefix)) throw invalidObjectPath();
  const rest = path.slice(prefix.length);
  const slash = rest.indexOf('/');
  if (slash < 0) throw invalidObjectPath();
  const bucket = decode(rest.slice(0, slash));
  const name = decode(rest.slice(slash + 1));
  if (bucket === null || name === null || !bucketIdOk(bucket) || !objectNameOk(name)) throw invalidObjectPath();
  return { bucket, name };
}

/** A bucket id from the raw path after `prefix` (list, bucket delete). Throws `err()`. */
export function parseBucketId(url: string, prefix: string, err: () => AppError): string {
  const path = rawPath(url);
  if (!path.startsWith(prefix)) throw err();
  const id = decode(path.slice(prefix.length));
  if (id === null || !bucketIdOk(id)) throw err();
  return id;
}
