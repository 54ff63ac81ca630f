/**
 * Typed wrappers, one per SQL entry function of sql/fixtures/storage/functions.sql. Each
 * runs as the calling role (`withContext`: one statement, one transaction, one round trip;
 * uploads use the transaction they are given). Outcomes are data: the routes switch on
 * `status` exhaustively.
 */
import type { Db, RequestContext, ReservedSql, Sql } from '../core/db.ts';
import { pgErrorToAppError } from '../core/errors.ts';

async function run<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw pgErrorToAppError(err, { trusted: true });
  }
}

export type CreateBucketResult = { status: 'ok'; body: string } | { status: 'exists'; body: null };

export async function createBucket(
  db: Db,
  ctx: RequestContext,
  b: { id: string; public: boolean; fileSizeLimit: number | null; allowedMimeTypes: string[] | null },
): Promise<CreateBucketResult> {
  const [r] = await run(
    db.withContext(ctx, (c) => c`select status, body from storage.create_bucket(${b.id}, ${b.public}, ${b.fileSizeLimit}::bigint, ${b.allowedMimeTypes}::text[])`),
  );
  return r as unknown as CreateBucketResult;
}

export async function listBuckets(db: Db, ctx: RequestContext): Promise<string> {
  const [r] = await run(db.withContext(ctx, (c) => c`select storage.list_buckets() as body`));
  return r.body as string;
}

export type DeleteBucketStatus = 'ok' | 'not_found' | 'not_empty';

export async function deleteBucket(db: Db, ctx: RequestContext, id: string): Promise<DeleteBucketStatus> {
  try {
    const [r] = await db.withContext(ctx, (c) => c`select storage.delete_bucket(${id}) as status`);
    return r.status as DeleteBucketStatus;
  } catch (err) {
    // An upload into the bucket committed between the check and the delete.
    if ((err as { code?: string }).code === '23503') return 'not_empty';
    throw pgErrorToAppError(err, { trusted: true });
  }
}

export type BeginUploadStatus = 'ok' | 'bucket_not_found' | 'too_large' | 'mime_not_allowed' | 'exists' | 'forbidden';

export interface BeginUpload {
  status: BeginUploadStatus;
  object_id: string | null;
  file_size_limit: string | null;
  replaced: string | null;
}

export async function beginUpload(
  tx: ReservedSql,
  u: { bucket: string; name: string; mimeType: string; declaredSize: number | null; upsert: boolean },
): Promise<BeginUpload> {
  const [r] = await run(
    tx<BeginUpload[]>`select status, object_id, file_size_limit, replaced
      from storage.begin_upload(${u.bucket}, ${u.name}, ${u.mimeType}, ${u.declaredSize}::bigint, ${u.upsert})`,
  );
  return r;
}

export async function finishUpload(tx: ReservedSql, id: string, size: number, etag: string, cacheControl: string | null = null): Promise<'ok' | 'too_large'> {
  const [r] = await run(
    tx<{ status: 'ok' | 'too_large' }[]>`select storage.finish_upload(${id}::uuid, ${size}::bigint, ${etag}, ${cacheControl}::text) as status`,
  );
  return r.status;
}

export interface ObjectMeta {
  status: 'ok' | 'not_found' | 'bucket_not_found';
  id: string | null;
  size: string | null;
  mime_type: string | null;
  etag: string | null;
  updated_at: Date | null;
  public: boolean | null;
  cache_control: string | null;
  created_at: Date | null;
}

export async function getObject(db: Db, ctx: RequestContext, bucket: string, name: string): Promise<ObjectMeta> {
  const [r] = await run(
    db.withContext(
      ctx,
      (c) => c`select status, id, size, mime_type, etag, updated_at, public, cache_control, created_at from storage.get_object(${bucket}, ${name})`,
    ),
  );
  return r as unknown as ObjectMeta;
}

export async function listObjects(
  db: Db,
  ctx: RequestContext,
  bucket: string,
  prefix: string,
): Promise<{ status: 'ok'; body: string } | { status: 'bucket_not_found'; body: null }> {
  const [r] = await run(db.withContext(ctx, (c) => c`select status, body from storage.list_objects(${bucket}, ${prefix})`));
  return r as unknown as { status: 'ok'; body: string };
}

export async function deleteObject(
  db: Db,
  ctx: RequestContext,
  bucket: string,
  name: string,
): Promise<{ status: 'ok' | 'not_found' | 'bucket_not_found' | 'forbidden'; id: string | null }> {
  const [r] = await run(db.withContext(ctx, (c) => c`select status, id from storage.delete_object(${bucket}, ${name})`));
  return r as unknown as { status: 'ok' | 'not_found' | 'bucket_not_found' | 'forbidden'; id: string | null };
}


/** An object of a public bucket, for anyone (no policies). */
export async function getPublicObject(db: Db, bucket: string, name: string): Promise<ObjectMeta> {
  const [r] = await run(
    db.sql<ObjectMeta[]>`select status, id, size, mime_type, etag, updated_at, public, cache_control, created_at
      from storage.get_public_object(${bucket}, ${name})`,
  );
  return r;
}

export async function getBucket(db: Db, ctx: RequestContext, id: string): Promise<string | null> {
  const [r] = await run(db.withContext(ctx, (c) => c`select storage.get_bucket(${id}) as body`));
  return (r.body as string | null) ?? null;
}

export async function updateBucket(db: Db, ctx: RequestContext, id: string, patch: Record<string, unknown>): Promise<'ok' | 'not_found'> {
  const [r] = await run(db.withContext(ctx, (c) => c`select storage.update_bucket(${id}, ${JSON.stringify(patch)}::jsonb) as status`));
  return r.status as 'ok' | 'not_found';
}

export async function emptyBucket(db: Db, ctx: RequestContext, id: string): Promise<{ status: 'ok' | 'not_found'; removed: { id: string; name: string }[] | null }> {
  const [r] = await run(db.withContext(ctx, (c) => c`select status, removed from storage.empty_bucket(${id})`));
  return r as unknown as { status: 'ok' | 'not_found'; removed: { id: string; name: string }[] | null };
}

export interface ListFolder {
  prefix: string;
  limit: number;
  offset: number;
  search: string;
  sortColumn: string;
  sortOrder: string;
}

export async function listFolder(
  db: Db,
  ctx: RequestContext,
  bucket: string,
  q: ListFolder,
): Promise<{ status: 'ok' | 'bucket_not_found' | 'invalid_sort'; body: string | null }> {
  const [r] = await run(
    db.withContext(
      ctx,
      (c) => c`select status, body from storage.list_folder(${bucket}, ${q.prefix}, ${q.limit}::int, ${q.offset}::int, ${q.search}, ${q.sortColumn}, ${q.sortOrder})`,
    ),
  );
  return r as unknown as { status: 'ok' | 'bucket_not_found' | 'invalid_sort'; body: string | null };
}

export async function objectInfo(db: Db, ctx: RequestContext, bucket: string, name: string): Promise<{ status: 'ok' | 'not_found' | 'bucket_not_found'; body: string | null }> {
  const [r] = await run(db.withContext(ctx, (c) => c`select status, body from storage.object_info(${bucket}, ${name})`));
  return r as unknown as { status: 'ok' | 'not_found' | 'bucket_not_found'; body: string | null };
}

export async function deleteObjects(db: Db, ctx: RequestContext, bucket: string, names: string[]): Promise<{ status: 'ok' | 'bucket_not_found'; body: string | null }> {
  const [r] = await run(db.withContext(ctx, (c) => c`select status, body from storage.delete_objects(${bucket}, ${names}::text[])`));
  return r as unknown as { status: 'ok' | 'bucket_not_found'; body: string | null };
}

export interface BeginCopy {
  status: BeginUploadStatus | 'not_found';
  src_id: string | null;
  size: string | null;
  mime_type: string | null;
  cache_control: string | null;
  object_id: string | null;
  replaced: string | null;
}

export async function beginCopy(
  tx: ReservedSql,
  c: { srcBucket: string; srcName: string; dstBucket: string; dstName: string; upsert: boolean; move: boolean },
): Promise<BeginCopy> {
  const [r] = await run(
    tx<BeginCopy[]>`select status, src_id, size, mime_type, cache_control, object_id, replaced
      from storage.begin_copy(${c.srcBucket}, ${c.srcName}, ${c.dstBucket}, ${c.dstName}, ${c.upsert}, ${c.move})`,
  );
  return r;
}

/** Of `names`, those in `bucket` the caller may read. */
export async function visibleObjects(db: Db, ctx: RequestContext, bucket: string, names: string[]): Promise<Set<string>> {
  const rows = await run(db.withContext(ctx, (c) => c`select name from storage.visible_objects(${bucket}, ${names}::text[]) as name`));
  return new Set(rows.map((r) => r.name as string));
}

/** Claim a signed upload token in the upload's transaction; false when it was used. */
export async function claimUploadToken(tx: ReservedSql, jti: string, expiresAt: Date): Promise<boolean> {
  const [r] = await run(tx<{ ok: boolean }[]>`select storage.claim_upload_token(${jti}::uuid, ${expiresAt}::timestamptz) as ok`);
  return r.ok;
}

export async function purgeUploadTokens(sql: Sql): Promise<void> {
  await sql`select storage_private.purge_upload_tokens()`;
}

// ---- resumable uploads (resumable.sql), with the service's own connection ----

export interface Resumable {
  id: string;
  bucket_id: string;
  name: string;
  role: string;
  sub: string | null;
  mime_type: string;
  cache_control: string | null;
  upsert: boolean;
  length: string;
  offset: string;
  expires_at: Date;
}

export async function createResumable(
  sql: Sql,
  u: { bucket: string; name: string; role: string; sub: string | null; mimeType: string; cacheControl: string | null; upsert: boolean; length: number },
): Promise<Resumable> {
  const [r] = await run(
    sql<Resumable[]>`insert into storage_private.resumable_uploads (bucket_id, name, role, sub, mime_type, cache_control, upsert, length)
      values (${u.bucket}, ${u.name}, ${u.role}, ${u.sub}, ${u.mimeType}, ${u.cacheControl}, ${u.upsert}, ${u.length}::bigint)
      returning id, bucket_id, name, role, sub, mime_type, cache_control, upsert, length, "offset", expires_at`,
  );
  return r;
}

/** A live upload (not expired), or null. */
export async function getResumable(sql: Sql, id: string): Promise<Resumable | null> {
  const [r] = await run(
    sql<Resumable[]>`select id, bucket_id, name, role, sub, mime_type, cache_control, upsert, length, "offset", expires_at
      from storage_private.resumable_uploads where id = ${id}::uuid and expires_at > pg_catalog.now()`,
  );
  return r ?? null;
}

export type TakeStatus = 'ok' | 'not_found' | 'busy' | 'offset_mismatch';

/** Take the write lease of the caller's upload at `expectedOffset`; with the upload's length. */
export async function takeResumable(
  sql: Sql,
  u: { id: string; writer: string; expectedOffset: number; leaseSeconds: number; role: string; sub: string | null },
): Promise<{ status: TakeStatus; length: string | null }> {
  const [r] = await run(
    sql<{ status: TakeStatus; length: string | null }[]>`select status, length
      from storage_private.take_resumable(${u.id}::uuid, ${u.writer}::uuid, ${u.expectedOffset}::bigint, ${u.leaseSeconds}::int, ${u.role}, ${u.sub})`,
  );
  return r;
}

/** The PATCH is over: the staged bytes as far as `offset`, and the lease given back. false: the lease was lost. */
export async function releaseResumable(sql: Sql, id: string, writer: string, offset: number): Promise<boolean> {
  const [r] = await run(sql<{ ok: boolean }[]>`select storage_private.release_resumable(${id}::uuid, ${writer}::uuid, ${offset}::bigint) as ok`);
  return r.ok;
}

export async function putResumablePart(sql: Sql, id: string, writer: string, at: number, data: Buffer): Promise<boolean> {
  const [r] = await run(
    sql<{ ok: boolean }[]>`select storage_private.put_resumable_part(${id}::uuid, ${writer}::uuid, ${at}::bigint, pg_catalog.decode(${data.toString('base64')}, 'base64')) as ok`,
  );
  return r.ok;
}

export async function deleteResumable(sql: Sql, id: string): Promise<void> {
  await run(sql`delete from storage_private.resumable_uploads where id = ${id}::uuid`);
}

/** Staged parts from `from` on, a few per statement. */
export async function resumableParts(sql: Sql, id: string, from: number, limit: number): Promise<{ offset: string; data: string }[]> {
  return run(
    sql<{ offset: string; data: string }[]>`select "offset", pg_catalog.encode(data, 'base64') as data from storage_private.resumable_parts
      where upload_id = ${id}::uuid and "offset" >= ${from}::bigint order by "offset" limit ${limit}`,
  );
}

export async function expiredResumables(sql: Sql): Promise<string[]> {
  const rows = await run(sql<{ id: string }[]>`select id from storage_private.expired_resumables() as id`);
  return rows.map((r) => r.id);
}
