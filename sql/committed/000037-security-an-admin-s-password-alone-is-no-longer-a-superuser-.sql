--! Previous: sha1:35e591718e20691a843b6ca68f59276152ea9bd4
--! Hash: sha1:44baed7081bce47c0fd8f1c9d2d13fc9ea1560f8
--! Message: security: an admin's password alone is no longer a superuser shell (auth.admin_aal_ok, plinth_sql), aal2 for email and password changes, hook claims protected, audit entries keep the service's request id

-- Enter migration here
--! Included auth/accounts.sql
/*
 * why: the account use cases of docs/api/auth.md — signup, password sign-in, the user's own
 * record (GET/PATCH /auth/v1/user) and guests. The service validates input, hashes
 * passwords (argon2id, off the database) and signs tokens; these functions own the rows.
 * Emails are stored lower-cased (GoTrue does the same) and compared with lower().
 */

/*
 * why: POST /auth/v1/signup. Without verification (REQUIRE_EMAIL_VERIFICATION=false) the
 * address counts as confirmed at once (GoTrue's autoconfirm: switching verification on
 * later must not lock out existing users) and a session starts in the same transaction.
 * With verification (`verification_token_hash` given) the account awaits confirmation, a
 * verification token is stored and its email enqueued; no session.
 * Confirmed is not proven: a sign-up proves nothing about who owns the address (see
 * auth_private.prove_address); only a used emailed token or a provider-verified OAuth
 * sign-in does.
 * Status: ok (session fields set) | confirmation_sent | email_taken.
 */
drop function if exists auth.sign_up(text, text, jsonb, bytea, text, bytea, integer);
drop function if exists auth.sign_up(text, text, jsonb, bytea, text, bytea, integer, jsonb);
create function auth.sign_up(
  email text,
  password_hash text,
  user_metadata jsonb,
  verification_token_hash bytea,
  sealed_verification_token text,
  refresh_token_hash bytea,
  refresh_ttl_seconds integer,
  context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users;
  v_verify boolean := sign_up.verification_token_hash is not null;
begin
  insert into auth.users (email, user_metadata, providers, email_confirmed_at)
    values (lower(sign_up.email), coalesce(sign_up.user_metadata, '{}'::jsonb), '{email}'::text[],
      case when v_verify then null else now() end)
    on conflict ((lower(email))) do nothing
    returning * into v_user;
  if not found then
    return auth_private.session_status('email_taken');
  end if;
  insert into auth_private.passwords (user_id, hash) values (v_user.id, sign_up.password_hash);
  perform auth_private.audit('sign_up', v_user.id, sign_up.context, '{}'::jsonb);
  if v_verify then
    perform auth_private.issue_one_time_token(v_user.id, v_user.email, 'verification',
      sign_up.verification_token_hash, sign_up.sealed_verification_token);
    return row('confirmation_sent', null, false, auth_private.user_json(v_user), null, null)::auth.session_result;
  end if;
  return auth.start_session(v_user.id, sign_up.refresh_token_hash, sign_up.refresh_ttl_seconds, null, 'password', sign_up.context);
end
$$;
comment on function auth.sign_up(text, text, jsonb, bytea, text, bytea, integer, jsonb) is E'Create an email/password account; start a session, or (verification token given) enqueue the confirmation email. Audited. Status: ok | confirmation_sent | email_taken.';

/*
 * why: password sign-in, step 1: the stored hash for an address, for the service to verify
 * (argon2 stays off the database), then `auth.start_session`. Accounts without a password
 * (OAuth, guests, admin-created without one) are not_found, like unknown addresses: the
 * service then verifies against a dummy hash so both cost the same. Role, email and
 * is_anonymous let the service sign the access token while argon2 runs.
 * Status: ok | not_found.
 */
drop function if exists auth.password_credentials(text);
create function auth.password_credentials(email text)
  returns table (status text, user_id uuid, password_hash text, email_confirmed boolean, role text, user_email text, is_anonymous boolean)
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  -- plpgsql, not sql: its plan is cached per connection; a SQL function's body is planned
  -- on every call, a measurable share of a sign-in when argon2 leaves little CPU over.
  return query
    select 'ok'::text, u.id, p.hash, u.email_confirmed_at is not null, u.role, u.email, u.is_anonymous
      from auth.users u join auth_private.passwords p on p.user_id = u.id
      where lower(u.email) = lower(password_credentials.email);
  if not found then
    return query select 'not_found'::text, null::uuid, null::text, null::boolean, null::text, null::text, null::boolean;
  end if;
end
$$;
comment on function auth.password_credentials(text) is E'The password hash and confirmation state of an address, for sign-in. Status: ok | not_found.';

/*
 * why: GET /auth/v1/user. The access token outlives a deleted user (docs/api/auth.md). The
 * user's MFA factors are listed as `factors` when there are any (GoTrue leaves it out
 * otherwise).
 * Status: ok | not_found.
 */
drop function if exists auth.get_user(uuid);
create function auth.get_user(user_id uuid)
  returns table (status text, user_json jsonb)
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  return query select 'ok'::text, auth_private.user_json(u) || auth_private.factors_json(u.id)
    from auth.users u where u.id = get_user.user_id;
  if not found then
    return query select 'not_found'::text, null::jsonb;
  end if;
end
$$;
comment on function auth.get_user(uuid) is E'The User object of an id. Status: ok | not_found.';

/*
 * why: PATCH /auth/v1/user (docs/api/auth.md). Null arguments leave a field alone.
 * - email changes at once (no confirmation flow is specified) and keeps the confirmation
 *   state; an address registered to another account is email_taken. The new address is
 *   not proven: its proven mark is removed (see auth_private.prove_address), so whoever
 *   really owns it may later prove it and take the account over from the mover.
 * - user_metadata merges top-level keys into the stored object; a key sent as null is
 *   removed (GoTrue's UpdateUserMetaData).
 * - A change of the email or the password ends every other session of the user (all
 *   refresh-token families but `session_id`, the caller's; `account_changed`), and the
 *   address the account had before the change is told (an `account_changed` email, in
 *   the same transaction; no link). An address given in another case is no change.
 * - A user with a verified second factor changes the email or the password only from an
 *   aal2 session (`aal`, the caller's token's claim), as GoTrue: someone holding only the
 *   password must not lock the owner out. Metadata alone needs no aal2.
 * Status: ok | not_found | email_taken | insufficient_aal.
 */
drop function if exists auth.update_user(uuid, text, text, jsonb);
drop function if exists auth.update_user(uuid, text, text, jsonb, uuid);
drop function if exists auth.update_user(uuid, text, text, jsonb, uuid, jsonb);
drop function if exists auth.update_user(uuid, text, text, jsonb, uuid, jsonb, text);
create function auth.update_user(user_id uuid, email text, password_hash text, user_metadata jsonb, session_id uuid, context jsonb default null,
    aal text default null)
  returns table (status text, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_old_email text;
  v_user auth.users;
  v_email_changed boolean;
  v_password_changed boolean := update_user.password_hash is not null;
begin
  select u.email into v_old_email from auth.users u where u.id = update_user.user_id for update;
  if (update_user.password_hash is not null or (update_user.email is not null and lower(update_user.email) is distinct from lower(v_old_email)))
     and update_user.aal is distinct from 'aal2'
     and exists (select 1 from auth_private.mfa_factors f where f.user_id = update_user.user_id and f.status = 'verified') then
    return query select 'insufficient_aal'::text, null::jsonb;
    return;
  end if;
  begin
    update auth.users u
      set email = coalesce(lower(update_user.email), u.email),
          user_metadata = case when update_user.user_metadata is null then u.user_metadata
            else (u.user_metadata || update_user.user_metadata)
              - coalesce((select array_agg(k.key) from jsonb_each(update_user.user_metadata) k where k.value = 'null'::jsonb), '{}'::text[])
            end,
          providers = case when update_user.password_hash is null or 'email' = any (u.providers) then u.providers
            else u.providers || '{email}'::text[] end,
          updated_at = now()
      where u.id = update_user.user_id
      returning * into v_user;
  exception when unique_violation then
    return query select 'email_taken'::text, null::jsonb;
    return;
  end;
  if v_user.id is null then
    return query select 'not_found'::text, null::jsonb;
    return;
  end if;
  v_email_changed := lower(v_user.email) is distinct from lower(v_old_email);
  if v_email_changed then
    delete from auth_private.proven_emails p where p.user_id = v_user.id;
  end if;
  if v_password_changed then
    insert into auth_private.passwords as p (user_id, hash) values (v_user.id, update_user.password_hash)
      on conflict (user_id) do update set hash = excluded.hash, updated_at = now();
  end if;
  if v_email_changed then
    perform auth_private.audit('email_changed', v_user.id, update_user.context, '{}'::jsonb);
  end if;
  if v_password_changed then
    perform auth_private.audit('password_changed', v_user.id, update_user.context, '{}'::jsonb);
  end if;
  if v_email_changed or v_password_changed then
    update auth_private.sessions s set revoked_at = now(), revoked_reason = 'account_changed'
      where s.user_id = v_user.id and s.revoked_at is null and s.id is distinct from update_user.session_id;
    if v_old_email is not null then
      perform graphile_worker.add_job('auth__send_email',
        pg_catalog.json_build_object('kind', 'account_changed', 'to', v_old_email,
          'email_changed', v_email_changed, 'password_changed', v_password_changed,
          'new_email', case when v_email_changed then v_user.email end),
        max_attempts => 5);
    end if;
  end if;
  return query select 'ok'::text, auth_private.user_json(v_user);
end
$$;
comment on function auth.update_user(uuid, text, text, jsonb, uuid, jsonb, text) is E'Change a user''s own email, password hash and metadata (merged; null keys removed); an email or password change ends the other sessions, tells the former address and is audited; with a verified factor it needs aal2. Status: ok | not_found | email_taken | insufficient_aal.';

/*
 * why: POST /auth/v1/anonymous: a real user row for the guest (no email, is_anonymous, the
 * guest role named by ANONYMOUS_ROLE) and its first session, in one transaction.
 * Status: ok.
 */
drop function if exists auth.sign_in_anonymously(text, jsonb, bytea, integer);
drop function if exists auth.sign_in_anonymously(text, jsonb, bytea, integer, jsonb);
create function auth.sign_in_anonymously(role text, user_metadata jsonb, refresh_token_hash bytea, ttl_seconds integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user_id uuid;
begin
  insert into auth.users (email, role, user_metadata, is_anonymous)
    values (null, sign_in_anonymously.role, coalesce(sign_in_anonymously.user_metadata, '{}'::jsonb), true)
    returning id into v_user_id;
  perform auth_private.audit('sign_up', v_user_id, sign_in_anonymously.context, '{"anonymous": true}'::jsonb);
  return auth.start_session(v_user_id, sign_in_anonymously.refresh_token_hash, sign_in_anonymously.ttl_seconds, null, 'anonymous',
    sign_in_anonymously.context);
end
$$;
comment on function auth.sign_in_anonymously(text, jsonb, bytea, integer, jsonb) is E'Create a guest user with the given role and start its session. Status: ok.';

/*
 * why: argon2 parameters change over time (OWASP); after a successful sign-in with an
 * outdated hash the service stores a new one. Status: ok | not_found.
 */
drop function if exists auth.rehash_password(uuid, text, text);
create function auth.rehash_password(user_id uuid, old_hash text, new_hash text)
  returns text
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  with changed as (
    update auth_private.passwords p set hash = rehash_password.new_hash, updated_at = now()
      where p.user_id = rehash_password.user_id and p.hash = rehash_password.old_hash
      returning 1
  )
  select case when exists (select 1 from changed) then 'ok' else 'not_found' end
$$;
comment on function auth.rehash_password(uuid, text, text) is E'Replace a password hash by a rehash of the same password, unless it changed meanwhile. Status: ok | not_found.';

revoke all on function auth.sign_up(text, text, jsonb, bytea, text, bytea, integer, jsonb), auth.password_credentials(text),
  auth.get_user(uuid), auth.update_user(uuid, text, text, jsonb, uuid, jsonb, text), auth.sign_in_anonymously(text, jsonb, bytea, integer, jsonb),
  auth.rehash_password(uuid, text, text)
  from public;
--! EndIncluded auth/accounts.sql
--! Included auth/hook.sql
/*
 * why: the custom access-token hook (AUTH_HOOK_CUSTOM_ACCESS_TOKEN=schema.function): an
 * application's SQL function `(event jsonb) returns jsonb`, called with GoTrue's event
 * shape {user_id, claims, authentication_method} whenever a token is issued, returns
 * {claims: {...}} to sign. This function runs it and holds the rules:
 * - the claims that make the token what it is cannot change: sub, role (a user has one
 *   role), aud, exp, iat, aal, amr, session_id, email and is_anonymous (RLS policies and
 *   the service read them as facts about the account and its sign-in). A change of one of
 *   them is undone and named in `refused` (the service logs it); every other claim the hook
 *   returns is signed.
 * - a hook that raises refuses the token: status `raised` with its message (the service
 *   answers 403 with it). GoTrue's `{error: {http_code, message}}` answer does the same
 *   with its own 4xx status.
 * - a missing function or an answer without a `claims` object: status `invalid`.
 * The time limit (2 s) is the service's: it cancels the statement, which ends here as an
 * error no handler below catches (query_canceled is not among `others`).
 * The hook runs with the rights of the service's database role.
 * Status: ok | raised | refused | invalid.
 */
drop function if exists auth.run_access_token_hook(text, jsonb);
create function auth.run_access_token_hook(hook text, event jsonb)
  returns table (status text, claims jsonb, refused text[], message text, http_code integer)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_proc regproc;
  v_result jsonb;
  v_claims jsonb;
  v_original jsonb := run_access_token_hook.event -> 'claims';
  v_refused text[] := '{}';
  v_key text;
  v_message text;
  v_code integer;
begin
  begin
    v_proc := pg_catalog.to_regproc(run_access_token_hook.hook);
  exception when others then
    v_proc := null;
  end;
  if v_proc is null then
    return query select 'invalid'::text, null::jsonb, null::text[], 'access token hook not found'::text, null::integer;
    return;
  end if;
  begin
    execute pg_catalog.format('select %s($1)::jsonb', v_proc::text) into v_result using run_access_token_hook.event;
  exception when others then
    get stacked diagnostics v_message = message_text;
    return query select 'raised'::text, null::jsonb, null::text[], v_message, null::integer;
    return;
  end;
  if pg_catalog.jsonb_typeof(v_result -> 'error') = 'object' then
    v_code := case when (v_result #>> '{error,http_code}') ~ '^4[0-9][0-9]$' then (v_result #>> '{error,http_code}')::integer else 403 end;
    return query select 'refused'::text, null::jsonb, null::text[], v_result #>> '{error,message}', v_code;
    return;
  end if;
  v_claims := v_result -> 'claims';
  if v_claims is null or pg_catalog.jsonb_typeof(v_claims) <> 'object' then
    return query select 'invalid'::text, null::jsonb, null::text[], 'access token hook returned no claims object'::text, null::integer;
    return;
  end if;
  foreach v_key in array array['sub', 'role', 'aud', 'exp', 'iat', 'aal', 'amr', 'session_id', 'email', 'is_anonymous'] loop
    if (v_claims -> v_key) is distinct from (v_original -> v_key) then
      v_refused := v_refused || v_key;
      v_claims := case when v_original ? v_key then v_claims || pg_catalog.jsonb_build_object(v_key, v_original -> v_key)
                       else v_claims - v_key end;
    end if;
  end loop;
  return query select 'ok'::text, v_claims, v_refused, null::text, null::integer;
end
$$;
comment on function auth.run_access_token_hook(text, jsonb) is E'Run the custom access-token hook on an event; sub, role, aud, exp, iat, aal, amr, session_id, email and is_anonymous cannot change (refused lists the tries). Status: ok | raised | refused | invalid.';
revoke all on function auth.run_access_token_hook(text, jsonb) from public;
--! EndIncluded auth/hook.sql
--! Included auth/audit.sql
/*
 * why: a record of who did what to accounts, for the operator: sign-ups, sign-ins (with the
 * method), failed sign-ins, refresh-token reuse, sign-outs, password and email changes,
 * recovery, MFA enrolment, verification and removal, admin actions and OAuth links. Each
 * entry has the time, the user, the client IP, the user agent and the request id. Never a
 * token, a code or a password: the detail holds ids and names only.
 *
 * The table lives in `auth` so a DBA finds it beside auth.users; only service_role may read
 * it (GET /auth/v1/admin/audit). Entries keep no foreign key: they outlive a deleted user.
 * The request id is the service's own id for the request (`request_id` of the context the
 * service passes; the setting `request.id` when there is no context): a caller may name its
 * request with X-Request-Id, and that name is kept beside it (`client_request_id`), but it
 * never becomes the id of its own audit entries. Entries older than
 * AUTH_AUDIT_RETENTION_DAYS are deleted by the hourly auth__purge job.
 */
create table if not exists auth.audit_log_entries (
  id bigint generated always as identity primary key,
  created_at timestamptz not null default now(),
  action text not null,
  user_id uuid,
  ip text,
  user_agent text,
  request_id text,
  detail jsonb not null default '{}'::jsonb,
  constraint audit_log_entries_detail_check check (jsonb_typeof(detail) = 'object')
);
alter table auth.audit_log_entries add column if not exists client_request_id text;
comment on column auth.audit_log_entries.client_request_id is E'The X-Request-Id the caller sent, when it sent a valid one; request_id is always the service''s own.';
create index if not exists audit_log_entries_created_at_idx on auth.audit_log_entries (created_at);
create index if not exists audit_log_entries_user_id_idx on auth.audit_log_entries (user_id, created_at);
revoke all on table auth.audit_log_entries from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
grant select on table auth.audit_log_entries to service_role;
comment on table auth.audit_log_entries is E'plinth: the account audit log (who did what, when, from where). No tokens, codes or passwords. Readable by service_role.';
comment on column auth.audit_log_entries.action is E'sign_up, sign_in, sign_in_failed, refresh_reuse_detected, sign_out, password_changed, email_changed, recovery_requested, recovery_completed, mfa_enrolled, mfa_verified, mfa_verify_failed, mfa_unenrolled, admin_user_created, admin_user_deleted, admin_factor_deleted, oauth_linked.';
comment on column auth.audit_log_entries.detail is E'Action-specific ids and names (method, factor_id, provider …); never a secret.';

/*
 * why: the one writer. `context` is what the service knows of the request:
 * {ip, user_agent, request_id, client_request_id}; null outside a request (a DBA calling a function).
 */
create or replace function auth_private.audit(action text, user_id uuid, context jsonb, detail jsonb default '{}'::jsonb)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  insert into auth.audit_log_entries (action, user_id, ip, user_agent, request_id, client_request_id, detail)
  values (audit.action, audit.user_id,
    left(audit.context ->> 'ip', 100),
    left(audit.context ->> 'user_agent', 512),
    left(case when audit.context is null then nullif(current_setting('request.id', true), '') else audit.context ->> 'request_id' end, 200),
    left(audit.context ->> 'client_request_id', 200),
    coalesce(audit.detail, '{}'::jsonb))
$$;
comment on function auth_private.audit(text, uuid, jsonb, jsonb) is E'Append an audit entry; context {ip, user_agent, request_id, client_request_id}; without a context, request.id is the request id.';
revoke all on function auth_private.audit(text, uuid, jsonb, jsonb) from public;

/*
 * why: a failed password sign-in is judged by the service (argon2 runs there), so it
 * reports it here. The address tried is kept only when it names an account.
 */
drop function if exists auth.record_failed_sign_in(text, jsonb);
create function auth.record_failed_sign_in(email text, context jsonb)
  returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user_id uuid;
begin
  select u.id into v_user_id from auth.users u where lower(u.email) = lower(record_failed_sign_in.email);
  perform auth_private.audit('sign_in_failed', v_user_id, record_failed_sign_in.context,
    jsonb_build_object('method', 'password'));
end
$$;
comment on function auth.record_failed_sign_in(text, jsonb) is E'Audit a failed password sign-in (the user when the address names one).';

/*
 * why: GET /auth/v1/admin/audit: newest first, filtered by user, action and time, paged by
 * page/per_page. The JSON text goes out as is.
 */
drop function if exists auth.list_audit_log(uuid, text, timestamptz, timestamptz, integer, integer);
create function auth.list_audit_log(user_id uuid, action text, since timestamptz, until timestamptz, page integer, per_page integer)
  returns text
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(json_agg(json_build_object(
      'id', e.id, 'created_at', auth_private.iso_utc(e.created_at), 'action', e.action, 'user_id', e.user_id,
      'ip', e.ip, 'user_agent', e.user_agent, 'request_id', e.request_id, 'client_request_id', e.client_request_id, 'detail', e.detail)
    order by e.id desc)::text, '[]')
  from (
    select * from auth.audit_log_entries a
    where (list_audit_log.user_id is null or a.user_id = list_audit_log.user_id)
      and (list_audit_log.action is null or a.action = list_audit_log.action)
      and (list_audit_log.since is null or a.created_at >= list_audit_log.since)
      and (list_audit_log.until is null or a.created_at < list_audit_log.until)
    order by a.id desc
    limit list_audit_log.per_page offset (list_audit_log.page - 1) * list_audit_log.per_page
  ) e
$$;
comment on function auth.list_audit_log(uuid, text, timestamptz, timestamptz, integer, integer) is E'Audit entries as a JSON array, newest first, filtered (null = any) and paged (page from 1).';

/*
 * why: retention (AUTH_AUDIT_RETENTION_DAYS, 0 keeps everything) and the MFA challenges
 * nobody can use any more; run by the hourly auth__purge job beside auth.purge_expired.
 */
drop function if exists auth.purge_audit_log(integer);
create function auth.purge_audit_log(retention_days integer)
  returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_entries bigint := 0;
  v_challenges bigint;
begin
  if purge_audit_log.retention_days > 0 then
    delete from auth.audit_log_entries e where e.created_at < now() - make_interval(days => purge_audit_log.retention_days);
    get diagnostics v_entries = row_count;
  end if;
  delete from auth_private.mfa_challenges c where c.expires_at < now() - interval '1 day';
  get diagnostics v_challenges = row_count;
  return jsonb_build_object('audit_log_entries', v_entries, 'mfa_challenges', v_challenges);
end
$$;
comment on function auth.purge_audit_log(integer) is E'Delete audit entries older than retention_days (0 keeps all) and MFA challenges a day past expiry. Returns the counts.';

revoke all on function auth.record_failed_sign_in(text, jsonb),
  auth.list_audit_log(uuid, text, timestamptz, timestamptz, integer, integer), auth.purge_audit_log(integer) from public;
--! EndIncluded auth/audit.sql
--! Included auth/admin_aal.sql
/*
 * why: a service-role route (the admin API, /api/sql, the dashboard's endpoints) let in a
 * user's token with the role service_role at aal1: an admin's password alone, without the
 * second factor the account has, deleted that factor and ran SQL. A user token with the role
 * service_role passes such a route at aal2, or at aal1 while the account has no verified
 * factor (it has nothing more to prove; the dashboard offers to enrol one). The service asks
 * this only for user tokens below aal2: the service-role key (no user) never comes here.
 * One index probe (mfa_factors_user_id_idx).
 */
drop function if exists auth.admin_aal_ok(uuid, text);
create function auth.admin_aal_ok(user_id uuid, aal text)
  returns boolean
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select admin_aal_ok.aal = 'aal2' or not exists (
    select 1 from auth_private.mfa_factors f where f.user_id = admin_aal_ok.user_id and f.status = 'verified')
$$;
comment on function auth.admin_aal_ok(uuid, text) is E'Whether a user token with the role service_role at this aal may pass a service-role route: aal2, or no verified factor.';
revoke all on function auth.admin_aal_ok(uuid, text) from public;
--! EndIncluded auth/admin_aal.sql
--! Included core/sql_role.sql
/*
 * why: POST /api/sql (and the dashboard's SQL view) ran its text on the owner's connection:
 * in the embedded start a superuser, so `copy … to program` ran commands as the OS user of
 * PostgreSQL. The endpoint's connections now log in as plinth_sql, with a password plinth
 * manages like the request lanes' (sql/fixtures/core/login_roles.sql): LOGIN, NOSUPERUSER,
 * NOCREATEDB, NOCREATEROLE, NOREPLICATION, a member of service_role only (INHERIT: it reads
 * and writes what the service role may, the tables and sequences of `public`), with CREATE
 * on `public` (DDL there is what the endpoint is for). It holds none of
 * pg_execute_server_program, pg_read_server_files and pg_write_server_files (any membership
 * but service_role is revoked), and since the session itself is plinth_sql, a RESET ROLE or
 * SET ROLE in the text reaches plinth_sql or service_role, never the owner.
 * BYPASSRLS when the role running this is a superuser (only a superuser may give it): an
 * administrator's console sees every row, as before; it reaches no file or program.
 * Objects it creates in `public` get the service role's grants by default, like the
 * migration role's (sql/fixtures/core/service_grants.sql); their functions are not
 * executable by PUBLIC unless granted (sql/fixtures/core/roles.sql). The owner is made a
 * member of plinth_sql, so it may manage those objects (webhook triggers) and cancel the
 * endpoint's statements. Tables the migrations made stay the owner's: the endpoint reads
 * and writes them but does not ALTER or DROP them.
 */
do $$
declare
  other record;
begin
  if not exists (select 1 from pg_catalog.pg_roles where rolname = 'plinth_sql') then
    create role plinth_sql login nosuperuser inherit nocreatedb nocreaterole noreplication;
  else
    alter role plinth_sql login nosuperuser inherit nocreatedb nocreaterole noreplication;
  end if;
  if (select rolsuper from pg_catalog.pg_roles where rolname = current_user) then
    alter role plinth_sql bypassrls;
  end if;
  for other in
    select r.rolname from pg_catalog.pg_auth_members m
      join pg_catalog.pg_roles r on r.oid = m.roleid
      join pg_catalog.pg_roles l on l.oid = m.member
    where l.rolname = 'plinth_sql' and r.rolname <> 'service_role'
  loop
    execute format('revoke %I from plinth_sql', other.rolname);
  end loop;
  grant service_role to plinth_sql;
  if current_user <> 'plinth_sql' then
    execute format('grant plinth_sql to %I', current_user);
  end if;
end
$$;
grant usage, create on schema public to plinth_sql;
alter default privileges for role plinth_sql in schema public grant select, insert, update, delete on tables to service_role;
alter default privileges for role plinth_sql in schema public grant usage, select on sequences to service_role;
alter default privileges for role plinth_sql revoke execute on functions from public;
comment on role plinth_sql is E'plinth: login role of POST /api/sql; not a superuser; member of service_role only; CREATE on public. See src/dev/index.ts.';
--! EndIncluded core/sql_role.sql
