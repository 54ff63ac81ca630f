--! Previous: sha1:a6c93a3a1a42a17a0e0d4619ffd6787b4179aeee
--! Hash: sha1:4765b4a821606e237ec6ccea963a92fb094ca1b7
--! Message: storage: cache_control, signed URLs and uploads, resumable uploads with a one-writer lease, the sweep of leftovers, an advisory lock per upload

--! Included storage/schema.sql
/*
 * why: storage metadata (docs/api/storage.md). Buckets and objects
 * live in schema `storage`, which the API roles may use; the bytes of the `database` back
 * end live in `storage_private.chunks`, which they cannot reach except through the two
 * guarded SECURITY DEFINER functions in functions.sql.
 *
 * Every object operation of the HTTP API runs as the calling role in one transaction, so
 * the RLS policies below decide who may create, read and delete what. They are the
 * defaults of docs/api/storage.md; a DBA may drop and replace them (plinth reads nothing from the
 * policy names).
 */
create schema if not exists storage;
create schema if not exists storage_private;
grant usage on schema storage to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
revoke all on schema storage_private from public;
comment on schema storage is E'plinth: buckets and objects (metadata). Bytes live in a back end (database, disk or s3).';
comment on schema storage_private is E'plinth: storage internals (the chunks of the database back end). No API role has USAGE.';

create table if not exists storage.buckets (
  id text primary key,
  public boolean not null default false,
  file_size_limit bigint not null default 52428800,
  allowed_mime_types text[],
  owner uuid default auth.uid(),
  created_at timestamptz not null default pg_catalog.now(),
  updated_at timestamptz not null default pg_catalog.now()
);
/* why: the same rules as the service's path validation (src/storage/paths.ts): one safe
   path segment, no leading dot. Dropped and added so that a re-run applies a change. */
alter table storage.buckets drop constraint if exists buckets_id_check;
alter table storage.buckets add constraint buckets_id_check check (
  pg_catalog.length(id) between 1 and 100 and id !~ '[/\\:\x01-\x1f\x7f]' and id !~ '^[.]');
alter table storage.buckets drop constraint if exists buckets_file_size_limit_check;
alter table storage.buckets add constraint buckets_file_size_limit_check check (file_size_limit >= 0);
comment on table storage.buckets is E'Buckets (interface §2.4). file_size_limit is in bytes; allowed_mime_types null = any type; entries may be type/* wildcards.';

create table if not exists storage.objects (
  id uuid primary key default gen_random_uuid(),
  bucket_id text not null references storage.buckets (id),
  name text collate "C" not null,
  owner uuid default auth.uid(),
  size bigint not null default 0,
  mime_type text not null default 'application/octet-stream',
  etag text,
  created_at timestamptz not null default pg_catalog.now(),
  updated_at timestamptz not null default pg_catalog.now(),
  constraint objects_bucket_id_name_key unique (bucket_id, name)
);
/* why: the Cache-Control an uploader asked for (storage-js sends `max-age=3600` by default);
   null: the service's default for the bucket's visibility. */
alter table storage.objects add column if not exists cache_control text;
comment on table storage.objects is E'Objects (interface §2.5): name is the path inside the bucket (a/1.txt). No ON DELETE CASCADE from buckets: a bucket must be empty to go (409 bucket not empty).';
create index if not exists objects_owner_idx on storage.objects (owner);

/* why: the bytes of the database back end, in fixed-size pieces (the last one shorter), so
   uploads and downloads stream and a byte range maps to a run of chunks. EXTERNAL storage:
   no compression attempt on bytes that are mostly compressed already. The cascade runs as
   the owner of this table, so deleting an object as the caller removes its chunks too. */
create table if not exists storage_private.chunks (
  object_id uuid not null references storage.objects (id) on delete cascade,
  seq integer not null,
  data bytea not null,
  primary key (object_id, seq)
);
alter table storage_private.chunks alter column data set storage external;
comment on table storage_private.chunks is E'Bytes of the database back end: chunk seq of object_id, every chunk but the last of the same size.';

alter table storage.buckets enable row level security;
alter table storage.objects enable row level security;

grant select on storage.buckets to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
grant insert, update, delete on storage.buckets to service_role;
grant select, insert, delete on storage.objects to anon, authenticated, service_role, ":ANONYMOUS_ROLE";

/* why: the default policies of docs/api/storage.md. service_role has BYPASSRLS. */
drop policy if exists buckets_read on storage.buckets;
create policy buckets_read on storage.buckets for select using (true);
comment on policy buckets_read on storage.buckets is E'Default: every caller may list buckets.';

drop policy if exists objects_public_read on storage.objects;
create policy objects_public_read on storage.objects for select
  using (exists (select 1 from storage.buckets b where b.id = bucket_id and b.public));
comment on policy objects_public_read on storage.objects is E'Default: anyone may read objects of a public bucket.';

drop policy if exists objects_owner_read on storage.objects;
create policy objects_owner_read on storage.objects for select to authenticated
  using (owner = auth.uid());
comment on policy objects_owner_read on storage.objects is E'Default: an authenticated caller reads its own objects.';

drop policy if exists objects_owner_insert on storage.objects;
create policy objects_owner_insert on storage.objects for insert to authenticated
  with check (owner = auth.uid());
comment on policy objects_owner_insert on storage.objects is E'Default: an authenticated caller creates objects; it becomes their owner.';

drop policy if exists objects_owner_delete on storage.objects;
create policy objects_owner_delete on storage.objects for delete to authenticated
  using (owner = auth.uid());
comment on policy objects_owner_delete on storage.objects is E'Default: an authenticated caller deletes its own objects (x-upsert replaces = delete + create).';
--! EndIncluded storage/schema.sql
--! Included storage/functions.sql
/*
 * why: one SQL entry function per storage use case (STYLE.md), each called from one typed
 * wrapper in src/storage/db.ts. Expected outcomes come back as data (`status`), never as
 * a RAISE. The object functions are SECURITY INVOKER: they run as the calling role, so the
 * RLS policies of schema.sql (or the DBA's) decide. Only put_chunk and finish_upload are
 * SECURITY DEFINER, and they touch nothing but an object row that the calling transaction
 * itself inserted (xmin = the current transaction id): a caller cannot write bytes to or
 * resize anybody's object, not even its own older ones.
 */

create or replace function storage.iso_utc(ts timestamptz) returns text
  language sql immutable
as $$
  select pg_catalog.to_char(pg_catalog.timezone('UTC', iso_utc.ts), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;
comment on function storage.iso_utc(timestamptz) is E'ISO 8601 UTC text of a timestamp.';

create or replace function storage.bucket_json(b storage.buckets) returns pg_catalog.jsonb
  language sql stable
as $$
  select pg_catalog.jsonb_build_object(
    'id', (b).id, 'name', (b).id, 'public', (b).public, 'file_size_limit', (b).file_size_limit,
    'allowed_mime_types', pg_catalog.to_jsonb((b).allowed_mime_types),
    'created_at', storage.iso_utc((b).created_at), 'updated_at', storage.iso_utc((b).updated_at))
$$;
comment on function storage.bucket_json(storage.buckets) is E'A bucket as its wire JSON (interface §2.4).';

/* The caller's functions below are invoker functions that call these helpers, so they live
   in schema storage (storage_private stays without USAGE for the API roles). */
revoke all on function storage.iso_utc(timestamptz), storage.bucket_json(storage.buckets) from public;
grant execute on function storage.iso_utc(timestamptz), storage.bucket_json(storage.buckets)
  to anon, authenticated, service_role, ":ANONYMOUS_ROLE";

/* Whether a MIME type passes a bucket's allowed list (null = any; type/star wildcards such as image/star). */
create or replace function storage.mime_allowed(mime_type text, allowed text[]) returns boolean
  language sql immutable
as $$
  select mime_allowed.allowed is null or exists (
    select 1 from pg_catalog.unnest(mime_allowed.allowed) a(t),
      lateral (select pg_catalog.lower(pg_catalog.btrim(pg_catalog.split_part(mime_allowed.mime_type, ';', 1))) as m) x
    where pg_catalog.lower(a.t) = x.m
       or (pg_catalog.right(a.t, 2) = '/*' and pg_catalog.split_part(x.m, '/', 1) = pg_catalog.lower(pg_catalog.split_part(a.t, '/', 1)))
       or a.t = '*/*')
$$;
revoke all on function storage.mime_allowed(text, text[]) from public;
grant execute on function storage.mime_allowed(text, text[]) to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on function storage.mime_allowed(text, text[]) is E'true when mime_type (parameters ignored, case-insensitive) is in allowed, or allowed is null.';

-- Buckets -------------------------------------------------------------------------------

drop function if exists storage.create_bucket(text, boolean, bigint, text[]);
create function storage.create_bucket(id text, public boolean, file_size_limit bigint, allowed_mime_types text[],
  out status text, out body text)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v storage.buckets;
begin
  insert into storage.buckets (id, public, file_size_limit, allowed_mime_types)
  values (create_bucket.id, coalesce(create_bucket.public, false), coalesce(create_bucket.file_size_limit, 52428800),
          create_bucket.allowed_mime_types)
  on conflict on constraint buckets_pkey do nothing
  returning * into v;
  if v.id is null then
    status := 'exists';
    return;
  end if;
  status := 'ok';
  body := storage.bucket_json(v)::text;
end
$$;
comment on function storage.create_bucket(text, boolean, bigint, text[]) is E'Create a bucket. status: ok (body = the bucket JSON) or exists.';

create or replace function storage.list_buckets() returns text
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(pg_catalog.jsonb_agg(storage.bucket_json(b) order by b.id), '[]')::text from storage.buckets b
$$;
comment on function storage.list_buckets() is E'The buckets the caller may see, as a JSON array ordered by id.';

create or replace function storage.delete_bucket(id text) returns text
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform 1 from storage.buckets b where b.id = delete_bucket.id for update;
  if not found then
    return 'not_found';
  end if;
  if exists (select 1 from storage.objects o where o.bucket_id = delete_bucket.id) then
    return 'not_empty';
  end if;
  delete from storage.buckets b where b.id = delete_bucket.id;
  return 'ok';
end
$$;
comment on function storage.delete_bucket(text) is E'Delete an empty bucket. status: ok, not_found or not_empty.';

-- Objects -------------------------------------------------------------------------------

drop function if exists storage.begin_upload(text, text, text, bigint, boolean);
create function storage.begin_upload(bucket_id text, name text, mime_type text, declared_size bigint, upsert boolean,
  out status text, out object_id uuid, out file_size_limit bigint, out replaced uuid)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_bucket storage.buckets;
  v_old uuid;
  v_n bigint;
begin
  select * into v_bucket from storage.buckets b where b.id = begin_upload.bucket_id;
  if v_bucket.id is null then
    status := 'bucket_not_found';
    return;
  end if;
  file_size_limit := v_bucket.file_size_limit;
  if begin_upload.declared_size is not null and begin_upload.declared_size > v_bucket.file_size_limit then
    status := 'too_large';
    return;
  end if;
  if not storage.mime_allowed(begin_upload.mime_type, v_bucket.allowed_mime_types) then
    status := 'mime_not_allowed';
    return;
  end if;
  object_id := gen_random_uuid();
  -- Held until this transaction ends: the sweep (sweep.sql) leaves the id's files alone meanwhile.
  perform pg_catalog.pg_advisory_xact_lock_shared(1886155636, pg_catalog.hashtext(begin_upload.object_id::text));
  for attempt in 1..20 loop
    if begin_upload.upsert then
      -- Replace = delete what the caller may delete, then create (the policies decide both).
      select o.id into v_old from storage.objects o where o.bucket_id = begin_upload.bucket_id and o.name = begin_upload.name;
      if v_old is not null then
        delete from storage.objects o where o.id = v_old;
        get diagnostics v_n = row_count;
        if v_n = 1 then
          replaced := v_old;
        elsif exists (select 1 from storage.objects o where o.id = v_old) then
          -- visible, still there, yet not deleted: no DELETE policy lets the caller
          status := 'forbidden';
          return;
        end if;
        -- else a concurrent upsert replaced it first: go on and conflict with (then replace) its row
      end if;
    end if;
    -- No RETURNING and no conflict target: either would make PostgreSQL check the SELECT
    -- policies on the new row as well as the INSERT ones (an anon drop box could not work).
    -- The only other unique key is the fresh id.
    insert into storage.objects (id, bucket_id, name, owner, size, mime_type)
    values (begin_upload.object_id, begin_upload.bucket_id, begin_upload.name, auth.uid(),
            coalesce(begin_upload.declared_size, 0), begin_upload.mime_type)
    on conflict do nothing;
    get diagnostics v_n = row_count;
    if v_n = 1 then
      status := 'ok';
      return;
    end if;
    if not begin_upload.upsert then
      status := 'exists';
      return;
    end if;
  end loop;
  -- upsert, yet the path stays taken by a row the caller can neither see nor delete
  status := 'exists';
end
$$;
comment on function storage.begin_upload(text, text, text, bigint, boolean) is
  E'Start an upload as the caller: bucket checks (declared size, MIME type), then the object row (RLS decides). status: ok, bucket_not_found, too_large, mime_not_allowed, exists, forbidden. replaced: the object an upsert deleted (its bytes go after commit).';

create or replace function storage.put_chunk(object_id uuid, seq integer, data bytea) returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if not exists (select 1 from storage.objects o
                 where o.id = put_chunk.object_id and o.xmin = pg_catalog.pg_current_xact_id()::xid) then
    raise exception 'object % was not created by this transaction', put_chunk.object_id using errcode = '42501';
  end if;
  insert into storage_private.chunks (object_id, seq, data) values (put_chunk.object_id, put_chunk.seq, put_chunk.data);
end
$$;
comment on function storage.put_chunk(uuid, integer, bytea) is
  E'Database back end: store chunk seq of an object that this very transaction created (begin_upload). SECURITY DEFINER, guarded by xmin.';

drop function if exists storage.finish_upload(uuid, bigint, text);
drop function if exists storage.finish_upload(uuid, bigint, text, text);
create function storage.finish_upload(object_id uuid, size bigint, etag text, cache_control text default null) returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_limit bigint;
begin
  select b.file_size_limit into v_limit
  from storage.objects o join storage.buckets b on b.id = o.bucket_id
  where o.id = finish_upload.object_id and o.xmin = pg_catalog.pg_current_xact_id()::xid;
  if v_limit is null then
    raise exception 'object % was not created by this transaction', finish_upload.object_id using errcode = '42501';
  end if;
  if finish_upload.size > v_limit then
    return 'too_large';
  end if;
  update storage.objects o set size = finish_upload.size, etag = finish_upload.etag, cache_control = finish_upload.cache_control,
    updated_at = pg_catalog.now()
  where o.id = finish_upload.object_id;
  return 'ok';
end
$$;
comment on function storage.finish_upload(uuid, bigint, text, text) is
  E'Record the final size, etag and Cache-Control of an object this transaction created. status: ok or too_large (over the bucket limit).';

drop function if exists storage.get_object(text, text);
create function storage.get_object(bucket_id text, name text,
  out status text, out id uuid, out size bigint, out mime_type text, out etag text, out updated_at timestamptz, out public boolean,
  out cache_control text, out created_at timestamptz)
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
begin
  select o.id, o.size, o.mime_type, o.etag, o.updated_at, o.cache_control, o.created_at
  into id, size, mime_type, etag, updated_at, cache_control, created_at
  from storage.objects o where o.bucket_id = get_object.bucket_id and o.name = get_object.name;
  if id is not null then
    select b.public into public from storage.buckets b where b.id = get_object.bucket_id;
    status := 'ok';
  elsif exists (select 1 from storage.buckets b where b.id = get_object.bucket_id) then
    status := 'not_found';
  else
    status := 'bucket_not_found';
  end if;
end
$$;
comment on function storage.get_object(text, text) is E'An object''s metadata as the caller sees it. status: ok, not_found or bucket_not_found.';

drop function if exists storage.list_objects(text, text);
create function storage.list_objects(bucket_id text, prefix text, out status text, out body text)
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
begin
  if not exists (select 1 from storage.buckets b where b.id = list_objects.bucket_id) then
    status := 'bucket_not_found';
    return;
  end if;
  select coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
      'id', o.id, 'name', o.name, 'size', o.size, 'mime_type', o.mime_type,
      'created_at', storage.iso_utc(o.created_at), 'updated_at', storage.iso_utc(o.updated_at))
    order by o.name), '[]')::text
  into body
  from storage.objects o
  where o.bucket_id = list_objects.bucket_id
    and (coalesce(list_objects.prefix, '') = ''
         or (o.name >= list_objects.prefix
             and pg_catalog.left(o.name, pg_catalog.length(list_objects.prefix)) = list_objects.prefix));
  status := 'ok';
end
$$;
comment on function storage.list_objects(text, text) is E'The objects of a bucket the caller may see whose name starts with prefix, as a JSON array ordered by name.';

drop function if exists storage.delete_object(text, text);
create function storage.delete_object(bucket_id text, name text, out status text, out id uuid)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_n bigint;
begin
  select o.id into id from storage.objects o where o.bucket_id = delete_object.bucket_id and o.name = delete_object.name;
  if id is null then
    status := case when exists (select 1 from storage.buckets b where b.id = delete_object.bucket_id)
                   then 'not_found' else 'bucket_not_found' end;
    return;
  end if;
  delete from storage.objects o where o.id = delete_object.id;
  get diagnostics v_n = row_count;
  status := case when v_n = 1 then 'ok' else 'forbidden' end;
end
$$;
comment on function storage.delete_object(text, text) is
  E'Delete an object as the caller. status: ok, not_found (invisible or absent), bucket_not_found or forbidden (visible, but no DELETE policy lets the caller). id: the deleted object (its bytes go after commit).';

revoke all on function storage.create_bucket(text, boolean, bigint, text[]), storage.list_buckets(), storage.delete_bucket(text),
  storage.begin_upload(text, text, text, bigint, boolean), storage.put_chunk(uuid, integer, bytea), storage.finish_upload(uuid, bigint, text, text),
  storage.get_object(text, text), storage.list_objects(text, text), storage.delete_object(text, text) from public;
grant execute on function storage.create_bucket(text, boolean, bigint, text[]), storage.delete_bucket(text) to service_role;
grant execute on function storage.list_buckets(),
  storage.begin_upload(text, text, text, bigint, boolean), storage.put_chunk(uuid, integer, bytea), storage.finish_upload(uuid, bigint, text, text),
  storage.get_object(text, text), storage.list_objects(text, text), storage.delete_object(text, text)
  to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
--! EndIncluded storage/functions.sql
--! Included storage/sweep.sql
/*
 * why: a back end that keeps bytes outside the database (disk) can be left with files
 * that no committed row names: the temporary file of an upload cut off by a crash, the
 * placed file of an upload whose transaction never committed, the bytes of a replaced or
 * deleted object whose removal the crash interrupted. The sweep (src/storage/backends/disk.ts,
 * at start and by the `storage__sweep` job) asks here which of the ids it found are left
 * over. An upload in progress holds a shared advisory lock on its id for the length of its
 * transaction (storage.begin_upload), so "idle" is exact across instances sharing one
 * STORAGE_DIR: no grace period, no clock.
 *
 * The lock is tried first and the row looked up in a later statement (a fresh snapshot):
 * an upload that commits between the two is then seen with its row.
 */
drop function if exists storage_private.idle_uploads(uuid[]);
create function storage_private.idle_uploads(ids uuid[])
  returns table (id uuid, has_row boolean)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_idle uuid[];
begin
  select coalesce(pg_catalog.array_agg(i), '{}') into v_idle
  from pg_catalog.unnest(idle_uploads.ids) i
  where pg_catalog.pg_try_advisory_xact_lock(1886155636, pg_catalog.hashtext(i::text));
  return query
    select i, exists (select 1 from storage.objects o where o.id = i)
    from pg_catalog.unnest(v_idle) i;
end
$$;
comment on function storage_private.idle_uploads(uuid[]) is
  E'Of ids (files found by a back end), those whose upload transaction is over (their advisory lock is free; held until this transaction ends), each with whether a committed object row names it.';
revoke all on function storage_private.idle_uploads(uuid[]) from public;

drop function if exists storage_private.schedule_sweep(integer);
create function storage_private.schedule_sweep(delay_seconds integer)
  returns void
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  select null::void from graphile_worker.add_job('storage__sweep', '{}'::json,
    run_at => now() + make_interval(secs => schedule_sweep.delay_seconds),
    job_key => 'storage__sweep', job_key_mode => 'preserve_run_at', max_attempts => 3)
$$;
comment on function storage_private.schedule_sweep(integer) is E'Enqueue the storage__sweep job (one for all instances) unless one is pending.';
revoke all on function storage_private.schedule_sweep(integer) from public;
--! EndIncluded storage/sweep.sql
--! Included storage/api.sql
/*
 * why: the storage calls a Supabase client makes beyond the seed's upload, download, list
 * and delete (docs/api/storage.md): a bucket read, update and empty, the folder listing of
 * storage-js's `list`, object info, bulk delete, copy and move, public and signed reads,
 * signed uploads. Same rules as functions.sql: one entry function per use case, outcomes as
 * data, SECURITY INVOKER unless a comment says why not, so the caller's RLS policies decide.
 *
 * And the helpers Supabase's storage policies are written with, so that its examples port
 * unchanged: `storage.foldername(name)`, `storage.filename(name)`, `storage.extension(name)`.
 */

create or replace function storage.foldername(name text) returns text[]
  language sql immutable
as $$
  select (pg_catalog.string_to_array(foldername.name, '/'))[1:pg_catalog.array_length(pg_catalog.string_to_array(foldername.name, '/'), 1) - 1]
$$;
comment on function storage.foldername(text) is E'The folders of an object path: foldername(''a/b/c.png'') = {a,b}. As Supabase''s.';

create or replace function storage.filename(name text) returns text
  language sql immutable
as $$
  select (pg_catalog.string_to_array(filename.name, '/'))[pg_catalog.array_length(pg_catalog.string_to_array(filename.name, '/'), 1)]
$$;
comment on function storage.filename(text) is E'The last segment of an object path: filename(''a/b/c.png'') = c.png. As Supabase''s.';

create or replace function storage.extension(name text) returns text
  language sql immutable
as $$
  select case when pg_catalog.strpos(storage.filename(extension.name), '.') = 0 then ''
              else pg_catalog.reverse(pg_catalog.split_part(pg_catalog.reverse(storage.filename(extension.name)), '.', 1)) end
$$;
comment on function storage.extension(text) is E'The text after the last dot of the file name (empty without one): extension(''a/b.tar.gz'') = gz. As Supabase''s.';

revoke all on function storage.foldername(text), storage.filename(text), storage.extension(text) from public;
grant execute on function storage.foldername(text), storage.filename(text), storage.extension(text)
  to anon, authenticated, service_role, ":ANONYMOUS_ROLE";

-- Buckets -------------------------------------------------------------------------------

create or replace function storage.get_bucket(id text) returns text
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select storage.bucket_json(b)::text from storage.buckets b where b.id = get_bucket.id
$$;
comment on function storage.get_bucket(text) is E'One bucket as its JSON, or null when the caller cannot see it.';

/* patch: the fields given are set (`allowed_mime_types: null` clears the list), the others kept. */
drop function if exists storage.update_bucket(text, jsonb);
create function storage.update_bucket(id text, patch jsonb) returns text
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  update storage.buckets b set
    public = case when update_bucket.patch ? 'public' then coalesce((update_bucket.patch ->> 'public')::boolean, false) else b.public end,
    file_size_limit = case when update_bucket.patch ? 'file_size_limit'
                           then coalesce((update_bucket.patch ->> 'file_size_limit')::bigint, 52428800) else b.file_size_limit end,
    allowed_mime_types = case when update_bucket.patch ? 'allowed_mime_types'
                              then (select pg_catalog.array_agg(t) from pg_catalog.jsonb_array_elements_text(
                                      case when pg_catalog.jsonb_typeof(update_bucket.patch -> 'allowed_mime_types') = 'array'
                                           then update_bucket.patch -> 'allowed_mime_types' end) t)
                              else b.allowed_mime_types end,
    updated_at = pg_catalog.now()
  where b.id = update_bucket.id;
  return case when found then 'ok' else 'not_found' end;
end
$$;
comment on function storage.update_bucket(text, jsonb) is E'Update a bucket''s public, file_size_limit and allowed_mime_types (the keys present in patch). status: ok or not_found.';

drop function if exists storage.empty_bucket(text);
create function storage.empty_bucket(id text, out status text, out removed jsonb)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  if not exists (select 1 from storage.buckets b where b.id = empty_bucket.id) then
    status := 'not_found';
    return;
  end if;
  with gone as (delete from storage.objects o where o.bucket_id = empty_bucket.id returning o.id, o.name)
  select coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('id', g.id, 'name', g.name)), '[]') into removed from gone g;
  status := 'ok';
end
$$;
comment on function storage.empty_bucket(text) is E'Delete every object of a bucket the caller may delete. status: ok or not_found; removed: [{id, name}] (their bytes go after commit).';

-- Objects -------------------------------------------------------------------------------

/* An object's `metadata` as Supabase lists it (storage-js reads it as it comes). */
create or replace function storage.object_metadata(o storage.objects) returns jsonb
  language sql stable
as $$
  select pg_catalog.jsonb_build_object(
    'eTag', '"' || coalesce((o).etag, pg_catalog.replace((o).id::text, '-', '')) || '"',
    'size', (o).size, 'mimetype', (o).mime_type, 'cacheControl', coalesce((o).cache_control, 'no-cache'),
    'lastModified', storage.iso_utc((o).updated_at), 'contentLength', (o).size, 'httpStatusCode', 200)
$$;
comment on function storage.object_metadata(storage.objects) is E'eTag, size, mimetype, cacheControl, lastModified, contentLength, httpStatusCode of an object.';
revoke all on function storage.object_metadata(storage.objects) from public;
grant execute on function storage.object_metadata(storage.objects) to anon, authenticated, service_role, ":ANONYMOUS_ROLE";

/*
 * storage-js's `list(prefix, options)`: the entries directly inside the folder `prefix` —
 * its objects (name relative to the folder, with id and metadata) and its sub-folders
 * (name only; id, dates and metadata null) — filtered by `search` (a name prefix, case
 * folded), sorted, then paged. Folders sort with the files; a folder has no dates, so
 * sorting by a date puts the folders first (ascending) as Supabase's search does.
 */
drop function if exists storage.list_folder(text, text, integer, integer, text, text, text);
create function storage.list_folder(bucket_id text, prefix text, "limit" integer, "offset" integer, search text,
  sort_column text, sort_order text, out status text, out body text)
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_prefix text := pg_catalog.rtrim(coalesce(list_folder.prefix, ''), '/');
  v_start text;
  v_desc boolean := pg_catalog.lower(coalesce(list_folder.sort_order, 'asc')) = 'desc';
  v_col text := coalesce(list_folder.sort_column, 'name');
begin
  if not exists (select 1 from storage.buckets b where b.id = list_folder.bucket_id) then
    status := 'bucket_not_found';
    return;
  end if;
  if v_col not in ('name', 'created_at', 'updated_at', 'last_accessed_at') then
    status := 'invalid_sort';
    return;
  end if;
  v_start := case when v_prefix = '' then '' else v_prefix || '/' end;
  with children as (
    select pg_catalog.split_part(pg_catalog.substr(o.name, pg_catalog.length(v_start) + 1), '/', 1) as child,
           pg_catalog.strpos(pg_catalog.substr(o.name, pg_catalog.length(v_start) + 1), '/') > 0 as is_folder,
           o
    from storage.objects o
    where o.bucket_id = list_folder.bucket_id
      and (v_start = '' or (o.name >= v_start and pg_catalog.left(o.name, pg_catalog.length(v_start)) = v_start))
  ), entries as (
    select distinct on (c.child, c.is_folder)
      c.child as name, c.is_folder,
      case when c.is_folder then null else (c.o).id end as id,
      case when c.is_folder then null else (c.o).created_at end as created_at,
      case when c.is_folder then null else (c.o).updated_at end as updated_at,
      case when c.is_folder then null else storage.object_metadata(c.o) end as metadata
    from children c
    where coalesce(list_folder.search, '') = '' or pg_catalog.lower(c.child) like pg_catalog.lower(pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(list_folder.search, '\', '\\'), '%', '\%'), '_', '\_')) || '%'
    order by c.child, c.is_folder
  ), page as (
    select e.* from entries e
    order by
      case when v_col = 'name' and not v_desc then e.name end collate "C" asc,
      case when v_col = 'name' and v_desc then e.name end collate "C" desc,
      case when v_col = 'created_at' and not v_desc then e.created_at end asc nulls first,
      case when v_col = 'created_at' and v_desc then e.created_at end desc nulls last,
      case when v_col in ('updated_at', 'last_accessed_at') and not v_desc then e.updated_at end asc nulls first,
      case when v_col in ('updated_at', 'last_accessed_at') and v_desc then e.updated_at end desc nulls last,
      e.name collate "C"
    limit greatest(coalesce(list_folder."limit", 100), 0) offset greatest(coalesce(list_folder."offset", 0), 0)
  )
  select coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
      'name', p.name, 'id', p.id, 'created_at', storage.iso_utc(p.created_at), 'updated_at', storage.iso_utc(p.updated_at),
      'last_accessed_at', storage.iso_utc(p.updated_at), 'metadata', p.metadata)), '[]')::text
  into body from page p;
  status := 'ok';
end
$$;
comment on function storage.list_folder(text, text, integer, integer, text, text, text) is
  E'The objects and sub-folders directly inside a folder of a bucket, as the caller sees them (storage-js list). status: ok, bucket_not_found or invalid_sort.';

drop function if exists storage.object_info(text, text);
create function storage.object_info(bucket_id text, name text, out status text, out body text)
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v storage.objects;
begin
  select * into v from storage.objects o where o.bucket_id = object_info.bucket_id and o.name = object_info.name;
  if v.id is null then
    status := case when exists (select 1 from storage.buckets b where b.id = object_info.bucket_id) then 'not_found' else 'bucket_not_found' end;
    return;
  end if;
  status := 'ok';
  body := pg_catalog.jsonb_build_object(
    'id', v.id, 'name', v.name, 'bucket_id', v.bucket_id, 'version', null, 'size', v.size, 'content_type', v.mime_type,
    'cache_control', coalesce(v.cache_control, 'no-cache'), 'etag', '"' || coalesce(v.etag, pg_catalog.replace(v.id::text, '-', '')) || '"',
    'metadata', '{}'::jsonb, 'last_modified', storage.iso_utc(v.updated_at), 'created_at', storage.iso_utc(v.created_at))::text;
end
$$;
comment on function storage.object_info(text, text) is E'An object''s details as storage-js info() reads them. status: ok, not_found or bucket_not_found.';

drop function if exists storage.delete_objects(text, text[]);
create function storage.delete_objects(bucket_id text, names text[], out status text, out body text)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  if not exists (select 1 from storage.buckets b where b.id = delete_objects.bucket_id) then
    status := 'bucket_not_found';
    return;
  end if;
  with gone as (
    delete from storage.objects o
    where o.bucket_id = delete_objects.bucket_id and o.name = any(delete_objects.names)
    returning o.*
  )
  select coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
      'id', g.id, 'name', g.name, 'bucket_id', g.bucket_id, 'owner', g.owner,
      'created_at', storage.iso_utc(g.created_at), 'updated_at', storage.iso_utc(g.updated_at),
      'last_accessed_at', storage.iso_utc(g.updated_at), 'metadata', storage.object_metadata(g)) order by g.name), '[]')::text
  into body from gone g;
  status := 'ok';
end
$$;
comment on function storage.delete_objects(text, text[]) is
  E'Delete the named objects of a bucket that the caller may delete (the others are skipped). status: ok or bucket_not_found; body: the deleted objects (their bytes go after commit).';

/*
 * Copy (and move = copy, then delete the source): the source as the caller sees it, then a
 * new object at the destination through begin_upload (bucket limits, conflict, the RLS
 * insert), and for a move the source deleted under the caller's DELETE policy. The bytes
 * are copied by the back end into the new object's id before the transaction commits.
 */
drop function if exists storage.begin_copy(text, text, text, text, boolean, boolean);
create function storage.begin_copy(src_bucket text, src_name text, dst_bucket text, dst_name text, upsert boolean, move boolean,
  out status text, out src_id uuid, out size bigint, out mime_type text, out cache_control text, out object_id uuid, out replaced uuid)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v storage.objects;
  u record;
  v_n bigint;
begin
  select * into v from storage.objects o where o.bucket_id = begin_copy.src_bucket and o.name = begin_copy.src_name;
  if v.id is null then
    status := case when exists (select 1 from storage.buckets b where b.id = begin_copy.src_bucket) then 'not_found' else 'bucket_not_found' end;
    return;
  end if;
  if begin_copy.src_bucket = begin_copy.dst_bucket and begin_copy.src_name = begin_copy.dst_name then
    status := 'exists';
    return;
  end if;
  src_id := v.id;
  size := v.size;
  mime_type := v.mime_type;
  cache_control := v.cache_control;
  if begin_copy.move then
    delete from storage.objects o where o.id = v.id;
    get diagnostics v_n = row_count;
    if v_n = 0 then
      status := 'forbidden';
      return;
    end if;
  end if;
  select * into u from storage.begin_upload(begin_copy.dst_bucket, begin_copy.dst_name, v.mime_type, v.size, begin_copy.upsert);
  status := u.status;
  object_id := u.object_id;
  replaced := u.replaced;
end
$$;
comment on function storage.begin_copy(text, text, text, text, boolean, boolean) is
  E'Start a copy (or move) as the caller. status: as begin_upload, or not_found / bucket_not_found for the source, forbidden when a move may not delete it. src_id: the source (its bytes go after commit on a move).';

/* A public bucket's objects are served to anyone, whatever the policies (as Supabase's
   /object/public does): SECURITY DEFINER, and it reveals nothing of a private bucket. */
drop function if exists storage.get_public_object(text, text);
create function storage.get_public_object(bucket_id text, name text,
  out status text, out id uuid, out size bigint, out mime_type text, out etag text, out updated_at timestamptz, out public boolean,
  out cache_control text, out created_at timestamptz)
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if not exists (select 1 from storage.buckets b where b.id = get_public_object.bucket_id and b.public) then
    status := 'bucket_not_found';
    return;
  end if;
  select o.id, o.size, o.mime_type, o.etag, o.updated_at, true, o.cache_control, o.created_at
  into id, size, mime_type, etag, updated_at, public, cache_control, created_at
  from storage.objects o where o.bucket_id = get_public_object.bucket_id and o.name = get_public_object.name;
  status := case when id is null then 'not_found' else 'ok' end;
end
$$;
comment on function storage.get_public_object(text, text) is E'An object of a public bucket, for anyone. status: ok, not_found, or bucket_not_found (also for a bucket that is not public).';

/* Signed upload URLs upload once: the token's id is claimed in the upload's transaction
   (a failed upload gives it back). Rows past their expiry are purged by the sweep job. */
create table if not exists storage_private.upload_tokens (
  jti uuid primary key,
  expires_at timestamptz not null
);
comment on table storage_private.upload_tokens is E'Signed upload tokens already used, kept until they expire.';

create or replace function storage.claim_upload_token(jti uuid, expires_at timestamptz) returns boolean
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  insert into storage_private.upload_tokens (jti, expires_at) values (claim_upload_token.jti, claim_upload_token.expires_at)
  on conflict do nothing;
  return found;
end
$$;
comment on function storage.claim_upload_token(uuid, timestamptz) is E'Claim a signed upload token in the calling transaction; false when it was used already.';

create or replace function storage_private.purge_upload_tokens() returns bigint
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  with gone as (delete from storage_private.upload_tokens t where t.expires_at < pg_catalog.now() returning 1)
  select pg_catalog.count(*) from gone
$$;
comment on function storage_private.purge_upload_tokens() is E'Forget used upload tokens past their expiry.';

revoke all on function storage.get_bucket(text), storage.update_bucket(text, jsonb), storage.empty_bucket(text),
  storage.list_folder(text, text, integer, integer, text, text, text), storage.object_info(text, text),
  storage.delete_objects(text, text[]), storage.begin_copy(text, text, text, text, boolean, boolean),
  storage.get_public_object(text, text), storage.claim_upload_token(uuid, timestamptz), storage_private.purge_upload_tokens() from public;
grant execute on function storage.update_bucket(text, jsonb), storage.empty_bucket(text) to service_role;
grant execute on function storage.get_bucket(text), storage.list_folder(text, text, integer, integer, text, text, text),
  storage.object_info(text, text), storage.delete_objects(text, text[]), storage.begin_copy(text, text, text, text, boolean, boolean),
  storage.get_public_object(text, text), storage.claim_upload_token(uuid, timestamptz)
  to anon, authenticated, service_role, ":ANONYMOUS_ROLE";

create or replace function storage.visible_objects(bucket_id text, names text[]) returns setof text
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select o.name from storage.objects o where o.bucket_id = visible_objects.bucket_id and o.name = any(visible_objects.names)
$$;
comment on function storage.visible_objects(text, text[]) is E'Of names, those in the bucket the caller may read (signed URLs for several paths).';
revoke all on function storage.visible_objects(text, text[]) from public;
grant execute on function storage.visible_objects(text, text[]) to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
--! EndIncluded storage/api.sql
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
   them to its file; the database staging recorded them already) and give the lease back. */
drop function if exists storage_private.advance_resumable(uuid, uuid, bigint);
create or replace function storage_private.release_resumable(id uuid, writer uuid, new_offset bigint) returns boolean
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
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
