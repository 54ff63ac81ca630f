-- Storage: Supabase's policy helpers, the folder listing, the sweep's idle check and the
-- resumable-upload lease, as SQL sees them.
begin;
select plan(16);

select is(storage.foldername('a/b/c.png'), array['a', 'b'], 'foldername: the folders');
select is(storage.foldername('c.png'), '{}'::text[], 'foldername: none at the root');
select is(storage.filename('a/b/c.png'), 'c.png', 'filename');
select is(storage.extension('a/b.tar.gz'), 'gz', 'extension: after the last dot');
select is(storage.extension('a/README'), '', 'extension: none');

insert into storage.buckets (id) values ('l');
insert into storage.objects (bucket_id, name) values ('l', 'd/a.txt'), ('l', 'd/B.txt'), ('l', 'd/sub/c.txt'), ('l', 'top.txt');
select is((select jsonb_path_query_array(body::jsonb, '$[*].name') from storage.list_folder('l', 'd', 100, 0, '', 'name', 'asc')),
  '["B.txt", "a.txt", "sub"]'::jsonb, 'list_folder: files and a sub-folder, by name');
select is((select jsonb_path_query_array(body::jsonb, '$[*].name') from storage.list_folder('l', 'd/', 1, 1, 'b', 'name', 'desc')),
  '[]'::jsonb, 'list_folder: search, then offset past the one match');
select is((select jsonb_path_query_array(body::jsonb, '$[*].name') from storage.list_folder('l', '', 100, 0, '', 'name', 'asc')),
  '["d", "top.txt"]'::jsonb, 'list_folder: the root');
select is((select status from storage.list_folder('l', '', 100, 0, '', 'size', 'asc')), 'invalid_sort', 'list_folder: an unknown sort column');

-- The sweep: an id whose upload holds the lock is not idle; a free one is, with or without a row.
select pg_advisory_xact_lock_shared(1886155636, hashtext('00000000-0000-4000-8000-0000000000a1'));
select is((select count(*)::int from storage_private.idle_uploads(array['00000000-0000-4000-8000-0000000000a1']::uuid[])), 1,
  'idle_uploads: this transaction''s own shared lock does not block it (same session)');
select is((select has_row from storage_private.idle_uploads(array[(select id from storage.objects where name = 'top.txt')]::uuid[])), true,
  'idle_uploads: a committed row is named');

-- The lease of a resumable upload.
insert into storage_private.resumable_uploads (id, bucket_id, name, role, sub, mime_type, length)
values ('00000000-0000-4000-8000-0000000000b1', 'l', 'r.bin', 'authenticated', 'u1', 'application/octet-stream', 10);
select is((select status from storage_private.take_resumable('00000000-0000-4000-8000-0000000000b1', '00000000-0000-4000-8000-0000000000c1', 0, 60, 'authenticated', 'u2')),
  'not_found', 'take_resumable: another user''s upload is not found');
select is((select status from storage_private.take_resumable('00000000-0000-4000-8000-0000000000b1', '00000000-0000-4000-8000-0000000000c1', 0, 60, 'authenticated', 'u1')),
  'ok', 'take_resumable: the lease');
select is((select status from storage_private.take_resumable('00000000-0000-4000-8000-0000000000b1', '00000000-0000-4000-8000-0000000000c2', 0, 60, 'authenticated', 'u1')),
  'busy', 'take_resumable: a second writer');
select is(storage_private.release_resumable('00000000-0000-4000-8000-0000000000b1', '00000000-0000-4000-8000-0000000000c1', 4), true, 'release_resumable: the offset recorded');
select is((select status from storage_private.take_resumable('00000000-0000-4000-8000-0000000000b1', '00000000-0000-4000-8000-0000000000c2', 0, 60, 'authenticated', 'u1')),
  'offset_mismatch', 'take_resumable: a stale offset');

select * from finish();
rollback;
