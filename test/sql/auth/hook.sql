-- The custom access-token hook runner: claims added, protected claims kept, raising and error answers.
begin;
select plan(9);

create schema hook_test;
create function hook_test.add(event jsonb) returns jsonb language sql as $$
  select jsonb_build_object('claims', event -> 'claims' || jsonb_build_object('plan', 'gold', 'm', event ->> 'authentication_method'))
$$;
create function hook_test.grab(event jsonb) returns jsonb language sql as $$
  select jsonb_build_object('claims', (event -> 'claims' || '{"role": "service_role", "aal": "aal2", "sub": "someone", "extra": 1}') - 'session_id')
$$;
create function hook_test.boom(event jsonb) returns jsonb language plpgsql as $$ begin raise exception 'no tokens today'; end $$;
create function hook_test.answer(event jsonb) returns jsonb language sql as $$ select '{"error": {"http_code": 429, "message": "later"}}'::jsonb $$;
create function hook_test.empty(event jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;

create temp table ev as select jsonb_build_object('user_id', 'u1', 'authentication_method', 'password',
  'claims', '{"sub": "u1", "role": "authenticated", "aud": "authenticated", "aal": "aal1", "session_id": "s1", "iat": 1, "exp": 2}'::jsonb) as e;

select is((select claims ->> 'plan' from auth.run_access_token_hook('hook_test.add', (select e from ev))), 'gold', 'a claim added');
select is((select claims ->> 'm' from auth.run_access_token_hook('hook_test.add', (select e from ev))), 'password', 'the event carries the method');
create temp table g as select * from auth.run_access_token_hook('hook_test.grab', (select e from ev));
select is((select claims from g), '{"sub": "u1", "role": "authenticated", "aud": "authenticated", "aal": "aal1", "session_id": "s1", "iat": 1, "exp": 2, "extra": 1}'::jsonb,
  'protected claims keep their values; the rest is kept');
select is((select refused from g), '{sub,role,aal,session_id}'::text[], 'the refused changes are named');
select is((select row(status, message)::text from auth.run_access_token_hook('hook_test.boom', (select e from ev))), '(raised,"no tokens today")', 'a raise: its message');
select is((select row(status, message, http_code)::text from auth.run_access_token_hook('hook_test.answer', (select e from ev))), '(refused,later,429)', 'an error answer: its status');
select is((select status from auth.run_access_token_hook('hook_test.empty', (select e from ev))), 'invalid', 'no claims object: invalid');
select is((select status from auth.run_access_token_hook('hook_test.missing', (select e from ev))), 'invalid', 'a missing function: invalid');
select is((select status from auth.run_access_token_hook('not a name(', (select e from ev))), 'invalid', 'a malformed name: invalid');

select * from finish();
rollback;
