-- Storage: the default policies of contract §7 (owner, other user, anon, public bucket,
-- service role) and the metadata functions, as SQL sees them.
-- An object committed by another transaction (dblink), for the put_chunk guard.
select extensions.dblink_exec(format('dbname=%s host=%s port=%s user=%s', current_database(),
    coalesce(host(inet_server_addr()), '127.0.0.1'), current_setting('port'), current_user),
  $$insert into storage.buckets (id) values ('committed');
    insert into storage.objects (id, bucket_id, name, owner)
    values ('00000000-0000-4000-8000-0000000000f1', 'committed', 'x', '00000000-0000-4000-8000-00000000000a')$$);

begin;
select plan(47);

-- Fixtures, as the migration role.
select is((select status from storage.create_bucket('priv', false, null, null)), 'ok', 'create_bucket: ok');
select is((select status from storage.create_bucket('pub', true, 100, array['text/*', 'image/png'])), 'ok', 'create_bucket: a public bucket');
select is((select status from storage.create_bucket('priv', true, null, null)), 'exists', 'create_bucket: an existing id');
select is((select file_size_limit from storage.buckets where id = 'priv'), 52428800::bigint, 'default file_size_limit');
select is((select (body::jsonb) ->> 'id' from storage.create_bucket('third', null, null, null)), 'third', 'the bucket JSON');
select throws_ok($$ insert into storage.buckets (id) values ('a/b') $$, '23514', null, 'a bucket id with a slash is refused');
select throws_ok($$ insert into storage.buckets (id) values ('..') $$, '23514', null, 'a bucket id .. is refused');

-- The owner uploads.
select tests.authenticate_as('00000000-0000-4000-8000-00000000000a');
create temp table a1 as select * from storage.begin_upload('priv', 'a/1.txt', 'text/plain', 3, false);
select is((select status from a1), 'ok', 'begin_upload: an authenticated caller creates');
select lives_ok($$ select storage.put_chunk((select object_id from a1), 0, '\x616263') $$, 'put_chunk: into its own new object');
select is(storage.finish_upload((select object_id from a1), 3, 'e1'), 'ok', 'finish_upload: ok');
select is((select owner from storage.objects where id = (select object_id from a1)), '00000000-0000-4000-8000-00000000000a'::uuid, 'the caller owns it');
select is((select status from storage.begin_upload('priv', 'a/1.txt', 'text/plain', 3, false)), 'exists', 'the same path again: exists');
select is((select status from storage.begin_upload('nope', 'x', 'text/plain', 3, false)), 'bucket_not_found', 'unknown bucket');
select is((select status from storage.begin_upload('pub', 'big.txt', 'text/plain', 101, false)), 'too_large', 'declared size over the limit');
select is((select status from storage.begin_upload('pub', 'x.gif', 'image/gif', 1, false)), 'mime_not_allowed', 'a type outside allowed_mime_types');
select is((select status from storage.begin_upload('pub', 'x.txt', 'text/plain; charset=utf-8', 1, false)), 'ok', 'text/* matches text/plain with parameters');
select is((select status from storage.begin_upload('pub', 'y.png', 'IMAGE/PNG', 1, false)), 'ok', 'types compare case-insensitively');
select is((select (status, size::int)::text from storage.get_object('priv', 'a/1.txt')), '(ok,3)', 'get_object: the owner sees it');
select is((select status from storage.get_object('priv', 'nothing')), 'not_found', 'get_object: not_found');
select is((select status from storage.get_object('nope', 'x')), 'bucket_not_found', 'get_object: bucket_not_found');
select is((select jsonb_array_length(body::jsonb) from storage.list_objects('priv', 'a/')), 1, 'list_objects with a prefix');
select is((select jsonb_array_length(body::jsonb) from storage.list_objects('priv', 'b/')), 0, 'the prefix filters');
select is((select (body::jsonb) -> 0 ->> 'name' from storage.list_objects('priv', '')), 'a/1.txt', 'list item name is the full path');
-- Upsert: delete + create; the old id is reported.
create temp table a2 as select * from storage.begin_upload('priv', 'a/1.txt', 'text/plain', 3, true);
select is((select status from a2), 'ok', 'upsert: ok');
select is((select replaced from a2), (select object_id from a1), 'upsert: the replaced object');
select tests.reset_role();
select is((select count(*)::int from storage_private.chunks where object_id = (select object_id from a1)), 0, 'its chunks went with it');

-- Another user.
select tests.authenticate_as('00000000-0000-4000-8000-00000000000b');
select is((select status from storage.get_object('priv', 'a/1.txt')), 'not_found', 'another user does not see a private object');
select is((select body from storage.list_objects('priv', '')), '[]', 'nor list it');
select is((select status from storage.delete_object('priv', 'a/1.txt')), 'not_found', 'nor delete it');
select is((select status from storage.begin_upload('priv', 'a/1.txt', 'text/plain', 3, true)), 'exists', 'nor replace it');
select is((select status from storage.begin_upload('pub', 'b.txt', 'text/plain', 1, false)), 'ok', 'it uploads to the public bucket');

-- Anon.
select tests.act_as('anon');
select is((select status from storage.get_object('priv', 'a/1.txt')), 'not_found', 'anon does not see a private object');
select is((select status from storage.get_object('pub', 'b.txt')), 'ok', 'anyone reads a public bucket');
select throws_ok($$ select storage.begin_upload('pub', 'anon.txt', 'text/plain', 1, false) $$, '42501', null, 'anon may not create objects');
select is((select status from storage.delete_object('pub', 'b.txt')), 'forbidden', 'anon sees a public object but may not delete it');
select is((select jsonb_array_length(storage.list_buckets()::jsonb)), 4, 'anon lists buckets');
select throws_ok($$ select storage.create_bucket('x', false, null, null) $$, '42501', null, 'anon may not create buckets');
select throws_ok($$ select * from storage_private.chunks $$, '42501', null, 'the chunks are out of reach');
select throws_ok($$ select storage.put_chunk('00000000-0000-4000-8000-0000000000f1', 0, '\x00') $$, '42501', null,
  'put_chunk refuses an object another transaction created');
select tests.authenticate_as('00000000-0000-4000-8000-00000000000a');
select throws_ok($$ select storage.put_chunk('00000000-0000-4000-8000-0000000000f1', 0, '\x00') $$, '42501', null,
  '... even for its owner');
select throws_ok($$ select storage.finish_upload('00000000-0000-4000-8000-0000000000f1', 1, 'x') $$, '42501', null,
  'finish_upload likewise');

-- Service role: bypasses RLS.
select tests.act_as('service_role');
select is((select jsonb_array_length(body::jsonb) from storage.list_objects('priv', '')), 1, 'service_role lists everything');
select is((select status from storage.get_object('committed', 'x')), 'ok', 'service_role reads any object');
select is(storage.delete_bucket('priv'), 'not_empty', 'delete_bucket: not_empty');
select is((select status from storage.delete_object('priv', 'a/1.txt')), 'ok', 'service_role deletes any object');
select is(storage.delete_bucket('priv'), 'ok', 'delete_bucket: ok once empty');
select is(storage.delete_bucket('priv'), 'not_found', 'delete_bucket: not_found');

select * from finish();
rollback;
