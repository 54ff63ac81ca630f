--! Previous: sha1:6dfc6887ed4195049152321ae80243ca565d88a7
--! Hash: sha1:223bf2d1bb3f5b1e0dace986aad7e553048a88b1
--! Message: storage: the database back end writes chunks by COPY through a checked view; resumable leases without a flush wait

-- Enter migration here
--! Included storage/copy.sql
/*
 * why: the database back end streams an upload's chunks with COPY … FROM STDIN (FORMAT
 * binary) instead of one statement per chunk: the bytes cross the wire once, unencoded (no
 * base64 or hex on either side), and the chunks follow each other without a round trip
 * between them. COPY FROM reaches storage_private.chunks only through this view, whose
 * INSTEAD OF trigger applies the guard of storage.put_chunk to every row: a chunk may only
 * be written for an object that the writing transaction created (begin_upload). Reads
 * (COPY … TO STDOUT) run on the service's own connection and need nothing here.
 */
create or replace view storage.chunk_copy as
  select null::uuid as object_id, null::integer as seq, null::bytea as data where false;
comment on view storage.chunk_copy is E'Database back end: the target of an upload''s COPY FROM STDIN (object_id, seq, data); every row goes through storage.put_chunk''s guard into storage_private.chunks. Always empty.';

create or replace function storage.chunk_copy_insert() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform storage.put_chunk(new.object_id, new.seq, new.data);
  return null;
end
$$;
comment on function storage.chunk_copy_insert() is E'INSTEAD OF INSERT on storage.chunk_copy: store the row as storage.put_chunk does (guarded by the object row''s xmin).';

drop trigger if exists chunk_copy_insert on storage.chunk_copy;
create trigger chunk_copy_insert instead of insert on storage.chunk_copy
  for each row execute function storage.chunk_copy_insert();

revoke all on storage.chunk_copy from public;
grant insert on storage.chunk_copy to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
--! EndIncluded storage/copy.sql
--! Included storage/resumable.sql
/*
 * why: resumable uploads (TUS 1.0.0 at /storage/v1/upload/resumable, src/storage/resumable.ts).
 * An upload in progress is a row here, created after the same checks as an upload (bucket,
 * size, MIME type, conflict, the caller's RLS insert, tried and rolled back); its bytes
 * wait in a staging area — a file under STORAGE_DIR/.tus on the disk back end, rows of
 * resumable_parts otherwise — until the last byte arrives; then the object is created as
 * any upload is, as the role and user that created the upload. Nothing here is reachable
 * by an API role: the service checks the caller against (role, sub) and calls these with
 * its own connection.
 *
 * One writer at a time: a PATCH takes a lease (writer, writer_until) and gives it back
 * when its request ends; a second writer meanwhile gets 409. A lease outlives only a crashed
 * instance, for LEASE at most. Uploads expire 24 hours after creation; the sweep job
 * deletes expired rows (and their parts, by cascade) and the staged files.
 */
create table if not exists storage_private.resumable_uploads (
  id uuid primary key default gen_random_uuid(),
  bucket_id text not null,
  name text not null,
  role text not null,
  sub text,
  mime_type text not null,
  cache_control text,
  upsert boolean not null default false,
  length bigint not null check (length >= 0),
  "offset" bigint not null default 0,
  writer uuid,
  writer_until timestamptz,
  expires_at timestamptz not null default pg_catalog.now() + interval '24 hours',
  created_at timestamptz not null default pg_catalog.now(),
  constraint resumable_uploads_offset_check check ("offset" between 0 and length)
);
comment on table storage_private.resumable_uploads is E'Resumable (TUS) uploads in progress: who, where, how long, how far, and the writer holding the lease.';

create table if not exists storage_private.resumable_parts (
  upload_id uuid not null references storage_private.resumable_uploads (id) on delete cascade,
  "offset" bigint not null,
  data bytea not null,
  primary key (upload_id, "offset")
);
alter table storage_private.resumable_parts alter column data set storage external;
comment on table storage_private.resumable_parts is E'Bytes of resumable uploads staged in the database (database and s3 back ends), by offset.';

drop function if exists storage_private.take_resumable(uuid, uuid, bigint, integer);
drop function if exists storage_private.take_resumable(uuid, uuid, bigint, integer, text, text);
create function storage_private.take_resumable(id uuid, writer uuid, expected_offset bigint, lease_seconds integer, role text, sub text,
  out status text, out length bigint)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v storage_private.resumable_uploads;
begin
  -- A lease lost in a crash of the database is harmless (the writer died with it): this
  -- transaction does not wait for its WAL flush.
  perform pg_catalog.set_config('synchronous_commit', 'off', true);
  select * into v from storage_private.resumable_uploads u where u.id = take_resumable.id for update;
  if v.id is null or v.expires_at < pg_catalog.now() or v.role <> take_resumable.role or v.sub is distinct from take_resumable.sub then
    status := 'not_found';
    return;
  end if;
  length := v.length;
  if v.writer is not null and v.writer_until > pg_catalog.now() then
    status := 'busy';
    return;
  end if;
  if v."offset" <> take_resumable.expected_offset then
    status := 'offset_mismatch';
    return;
  end if;
  update storage_private.resumable_uploads u
  set writer = take_resumable.writer, writer_until = pg_catalog.now() + pg_catalog.make_interval(secs => take_resumable.lease_seconds)
  where u.id = take_resumable.id;
  status := 'ok';
end
$$;
comment on function storage_private.take_resumable(uuid, uuid, bigint, integer, text, text) is
  E'Take the write lease of the caller''s (role, sub) upload at expected_offset. status: ok, not_found (or expired, or another caller''s), busy (another writer holds it) or offset_mismatch; length: the upload''s.';

/* The PATCH is over: record the staged bytes as far as new_offset (the disk staging wrote
   them to its file; the database staging recorded them already) and give the lease back.
   Without waiting for the WAL flush: an offset lost in a crash of the database is one a
   client resumes from an earlier point (HEAD), rewriting bytes that are staged already. */
drop function if exists storage_private.advance_resumable(uuid, uuid, bigint);
create or replace function storage_private.release_resumable(id uuid, writer uuid, new_offset bigint) returns boolean
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select pg_catalog.set_config('synchronous_commit', 'off', true);
  with up as (
    update storage_private.resumable_uploads u
    set "offset" = greatest(u."offset", least(release_resumable.new_offset, u.length)), writer = null, writer_until = null
    where u.id = release_resumable.id and u.writer = release_resumable.writer
    returning 1)
  select exists (select 1 from up)
$$;
comment on function storage_private.release_resumable(uuid, uuid, bigint) is E'Record an upload''s staged bytes as far as new_offset and give back the write lease. false: the lease was lost.';

/* One staged part in the database, and the offset past it, in one statement. */
create or replace function storage_private.put_resumable_part(id uuid, writer uuid, at bigint, data bytea) returns boolean
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  update storage_private.resumable_uploads u set "offset" = u."offset" + pg_catalog.length(put_resumable_part.data)
  where u.id = put_resumable_part.id and u.writer = put_resumable_part.writer and u."offset" = put_resumable_part.at
    and u."offset" + pg_catalog.length(put_resumable_part.data) <= u.length;
  if not found then
    return false;
  end if;
  insert into storage_private.resumable_parts (upload_id, "offset", data) values (put_resumable_part.id, put_resumable_part.at, put_resumable_part.data);
  return true;
end
$$;
comment on function storage_private.put_resumable_part(uuid, uuid, bigint, bytea) is E'Stage bytes at offset at of an upload, for the lease holder. false: the lease was lost or the offset moved.';

drop function if exists storage_private.release_resumable(uuid, uuid);


create or replace function storage_private.expired_resumables() returns setof uuid
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  delete from storage_private.resumable_uploads u where u.expires_at < pg_catalog.now() returning u.id
$$;
comment on function storage_private.expired_resumables() is E'Delete the uploads past their expiry (their staged parts go with them); returns their ids, for the staged files.';

revoke all on function storage_private.take_resumable(uuid, uuid, bigint, integer, text, text),
  storage_private.put_resumable_part(uuid, uuid, bigint, bytea), storage_private.release_resumable(uuid, uuid, bigint),
  storage_private.expired_resumables() from public;
--! EndIncluded storage/resumable.sql
