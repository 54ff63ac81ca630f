--! Previous: sha1:a1792f9232ea5695cf0d7dd898c330cff984f177
--! Hash: sha1:94200791fdce35de8c0a9d443f5b1afd0812ca28
--! Message: storage: buckets, objects, chunks, default policies, metadata functions

-- Enter migration here
--! Included storage/schema.sql
/*
 * why: storage metadata (interface §2.4, §2.5, §4.8; contract §7). Buckets and objects
 * live in schema `storage`, which the API roles may use; the bytes of the `database` back
 * end live in `storage_private.chunks`, which they cannot reach except through the two
 * guarded SECURITY DEFINER functions in functions.sql.
 *
 * Every object operation of the HTTP API runs as the calling role in one transaction, so
 * the RLS policies below decide who may create, read and delete what. They are the
 * defaults of contract §7; a DBA may drop and replace them (plinth reads nothing from the
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

/* why: the default policies of contract §7. service_role has BYPASSRLS. */
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

create or replace function storage.finish_upload(object_id uuid, size bigint, etag text) returns text
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
  update storage.objects o set size = finish_upload.size, etag = finish_upload.etag, updated_at = pg_catalog.now()
  where o.id = finish_upload.object_id;
  return 'ok';
end
$$;
comment on function storage.finish_upload(uuid, bigint, text) is
  E'Record the final size and etag of an object this transaction created. status: ok or too_large (over the bucket limit).';

drop function if exists storage.get_object(text, text);
create function storage.get_object(bucket_id text, name text,
  out status text, out id uuid, out size bigint, out mime_type text, out etag text, out updated_at timestamptz, out public boolean)
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
begin
  select o.id, o.size, o.mime_type, o.etag, o.updated_at into id, size, mime_type, etag, updated_at
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
  storage.begin_upload(text, text, text, bigint, boolean), storage.put_chunk(uuid, integer, bytea), storage.finish_upload(uuid, bigint, text),
  storage.get_object(text, text), storage.list_objects(text, text), storage.delete_object(text, text) from public;
grant execute on function storage.create_bucket(text, boolean, bigint, text[]), storage.delete_bucket(text) to service_role;
grant execute on function storage.list_buckets(),
  storage.begin_upload(text, text, text, bigint, boolean), storage.put_chunk(uuid, integer, bytea), storage.finish_upload(uuid, bigint, text),
  storage.get_object(text, text), storage.list_objects(text, text), storage.delete_object(text, text)
  to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
--! EndIncluded storage/functions.sql
