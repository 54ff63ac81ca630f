--! Previous: sha1:df5543392132a82d3effda2d84677365392674b8
--! Hash: sha1:79953c3cd014a3fb6c6b6aea5df4b15900c11d02
--! Message: auth: passkeys

-- Enter migration here
--! Included auth/passkeys.sql
/*
 * why: passkeys (WebAuthn discoverable credentials), in GoTrue's shapes (docs/api/auth.md,
 * Passkeys). The service checks the signatures (@simplewebauthn/server); the state lives
 * here, and every step of it is one of these functions:
 *
 *   challenge   issued (32 random bytes drawn here, 5 minutes) --(consumed once)--> gone
 *               a registration challenge is bound to the signed-in user who asked for it;
 *               an authentication challenge to no one (the passkey names its user).
 *               Consuming deletes the row whatever comes next: a replayed or raced
 *               challenge is `not_found`, a late one `expired`.
 *   passkey     registered (after a verified attestation) --(each sign-in)--> sign_count
 *               and last_used_at move on --(deleted by its user)--> gone
 *
 * - A sign-in's signature counter must grow when either side is non-zero (WebAuthn §6.1.1:
 *   a counter that does not grow means a cloned authenticator); authenticators that keep
 *   no counter (always 0, as synced passkeys) are accepted.
 * - A sign-in opens the session through auth.start_session (amr `passkey`, aal1): a banned
 *   user is refused there (PT403 `user is banned`) and nothing of the sign-in is kept.
 * - `auth.passkeys` holds public keys only (nothing secret) but API roles have no grant on
 *   it and RLS is on without policies: an app reads passkeys through the endpoints.
 */
create table if not exists auth.passkeys (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users (id) on delete cascade,
  credential_id bytea not null,
  public_key bytea not null,
  sign_count bigint not null default 0,
  transports text[] not null default '{}'::text[],
  friendly_name text,
  aaguid uuid,
  backup_eligible boolean not null default false,
  backed_up boolean not null default false,
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  constraint passkeys_credential_id_key unique (credential_id),
  constraint passkeys_credential_id_check check (octet_length(credential_id) between 1 and 1023),
  constraint passkeys_sign_count_check check (sign_count >= 0),
  constraint passkeys_name_check check (friendly_name is null or length(friendly_name) between 1 and 120)
);
create index if not exists passkeys_user_id_idx on auth.passkeys (user_id);
alter table auth.passkeys enable row level security;
revoke all on table auth.passkeys from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on table auth.passkeys is E'plinth: WebAuthn credentials (passkeys) of users: COSE public key, signature counter, transports. Read through /auth/v1/passkeys.';
comment on column auth.passkeys.credential_id is E'The authenticator''s credential id (raw bytes), unique across users.';
comment on column auth.passkeys.sign_count is E'The last signature counter seen; a sign-in must present a larger one unless both are 0.';

create table if not exists auth_private.passkey_challenges (
  id uuid primary key default gen_random_uuid(),
  kind text not null,
  user_id uuid references auth.users (id) on delete cascade,
  challenge bytea not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  constraint passkey_challenges_kind_check check (kind in ('registration', 'authentication')),
  constraint passkey_challenges_user_check check ((kind = 'registration') = (user_id is not null))
);
create index if not exists passkey_challenges_expires_at_idx on auth_private.passkey_challenges (expires_at);
comment on table auth_private.passkey_challenges is E'plinth: WebAuthn challenges, used once, 5 minutes; registration ones bound to their user.';

/* why: the JSON of a passkey the endpoints answer (GoTrue's PasskeyListItem). */
create or replace function auth_private.passkey_json(p auth.passkeys) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_strip_nulls(jsonb_build_object('id', p.id, 'friendly_name', p.friendly_name,
    'created_at', auth_private.iso_utc(p.created_at), 'last_used_at', auth_private.iso_utc(p.last_used_at)))
$$;
comment on function auth_private.passkey_json(auth.passkeys) is E'{id, friendly_name, created_at, last_used_at} (null fields left out).';
revoke all on function auth_private.passkey_json(auth.passkeys) from public;

/*
 * why: as for TOTP factors, a user with a verified second factor manages passkeys only from
 * an aal2 session: someone holding only the password must not add (or remove) a way in.
 */
create or replace function auth_private.passkey_needs_aal2(user_id uuid, aal text) returns boolean
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select passkey_needs_aal2.aal is distinct from 'aal2' and exists (
    select 1 from auth_private.mfa_factors f where f.user_id = passkey_needs_aal2.user_id and f.status = 'verified')
$$;
comment on function auth_private.passkey_needs_aal2(uuid, text) is E'Whether managing this user''s passkeys from a session at this aal is refused (a verified factor and not aal2).';
revoke all on function auth_private.passkey_needs_aal2(uuid, text) from public;

/*
 * why: issue a challenge. Registration (user_id given): the user must exist, not be a guest,
 * be at aal2 when it has a verified factor (`aal` is the session's), and have fewer than
 * max_passkeys; the answer carries what the options need (the user's
 * name for the authenticator, the credential ids it already has, to exclude). Expired
 * challenges are swept here (the table stays small).
 * Status: ok | user_not_found | anonymous | aal2_required | too_many.
 */
drop function if exists auth.passkey_challenge(text, uuid, integer, integer);
drop function if exists auth.passkey_challenge(text, uuid, text, integer, integer);
create function auth.passkey_challenge(kind text, user_id uuid, aal text, ttl_seconds integer, max_passkeys integer,
    out status text, out challenge_id uuid, out challenge bytea, out expires_at timestamptz,
    out user_name text, out user_display_name text, out exclude bytea[])
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users;
begin
  delete from auth_private.passkey_challenges c where c.expires_at < now();
  if passkey_challenge.kind = 'registration' then
    select * into v_user from auth.users u where u.id = passkey_challenge.user_id;
    if not found then
      status := 'user_not_found';
      return;
    elsif v_user.is_anonymous then
      status := 'anonymous';
      return;
    elsif auth_private.passkey_needs_aal2(v_user.id, passkey_challenge.aal) then
      status := 'aal2_required';
      return;
    end if;
    select coalesce(array_agg(p.credential_id order by p.created_at), '{}') into exclude
      from auth.passkeys p where p.user_id = v_user.id;
    if cardinality(exclude) >= passkey_challenge.max_passkeys then
      status := 'too_many';
      return;
    end if;
    user_name := coalesce(v_user.email, v_user.id::text);
    user_display_name := coalesce(nullif(v_user.user_metadata ->> 'name', ''), user_name);
  elsif passkey_challenge.kind <> 'authentication' then
    raise exception 'unknown challenge kind %', passkey_challenge.kind using errcode = '22023';
  end if;
  insert into auth_private.passkey_challenges (kind, user_id, challenge, expires_at)
    values (passkey_challenge.kind, case when passkey_challenge.kind = 'registration' then v_user.id end,
      extensions.gen_random_bytes(32), now() + make_interval(secs => passkey_challenge.ttl_seconds))
    returning id, challenge, expires_at into challenge_id, challenge, expires_at;
  status := 'ok';
end
$$;
comment on function auth.passkey_challenge(text, uuid, text, integer, integer) is E'Issue a registration (for a user) or authentication challenge. Status: ok | user_not_found | anonymous | aal2_required | too_many.';

/*
 * why: take a challenge, once. The row is deleted whatever the outcome, so a replay finds
 * nothing; a registration challenge only opens for the user it was issued to (another
 * user's is `not_found`, as an unknown one).
 * Status: ok | not_found | expired.
 */
drop function if exists auth.passkey_consume_challenge(uuid, text, uuid);
create function auth.passkey_consume_challenge(challenge_id uuid, kind text, user_id uuid, out status text, out challenge bytea)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v auth_private.passkey_challenges;
begin
  delete from auth_private.passkey_challenges c
    where c.id = passkey_consume_challenge.challenge_id
      and c.kind = passkey_consume_challenge.kind
      and c.user_id is not distinct from passkey_consume_challenge.user_id
    returning * into v;
  if not found then
    status := 'not_found';
  elsif v.expires_at <= now() then
    status := 'expired';
  else
    status := 'ok';
    challenge := v.challenge;
  end if;
end
$$;
comment on function auth.passkey_consume_challenge(uuid, text, uuid) is E'Take a challenge once (deleted whatever follows). Status: ok | not_found | expired.';

/*
 * why: keep a verified registration. The limit is checked again under the user's row lock
 * (two registrations racing past the options' check). Audited as passkey_created.
 * Status: ok | user_not_found | too_many | credential_taken.
 */
drop function if exists auth.passkey_register(uuid, bytea, bytea, bigint, text[], text, uuid, boolean, boolean, integer, jsonb);
create function auth.passkey_register(user_id uuid, credential_id bytea, public_key bytea, sign_count bigint, transports text[],
    friendly_name text, aaguid uuid, backup_eligible boolean, backed_up boolean, max_passkeys integer, context jsonb default null,
    out status text, out passkey jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_row auth.passkeys;
begin
  perform 1 from auth.users u where u.id = passkey_register.user_id for update;
  if not found then
    status := 'user_not_found';
    return;
  end if;
  if (select count(*) from auth.passkeys p where p.user_id = passkey_register.user_id) >= passkey_register.max_passkeys then
    status := 'too_many';
    return;
  end if;
  insert into auth.passkeys (user_id, credential_id, public_key, sign_count, transports, friendly_name, aaguid, backup_eligible, backed_up)
    values (passkey_register.user_id, passkey_register.credential_id, passkey_register.public_key, passkey_register.sign_count,
      coalesce(passkey_register.transports, '{}'), nullif(passkey_register.friendly_name, ''), passkey_register.aaguid,
      passkey_register.backup_eligible, passkey_register.backed_up)
    on conflict (credential_id) do nothing
    returning * into v_row;
  if not found then
    status := 'credential_taken';
    return;
  end if;
  perform auth_private.audit('passkey_created', v_row.user_id, passkey_register.context, jsonb_build_object('passkey_id', v_row.id));
  status := 'ok';
  passkey := auth_private.passkey_json(v_row);
end
$$;
comment on function auth.passkey_register(uuid, bytea, bytea, bigint, text[], text, uuid, boolean, boolean, integer, jsonb) is E'Store a verified passkey for a user; audited. Status: ok | user_not_found | too_many | credential_taken.';

/*
 * why: what verifying a sign-in needs of the passkey a browser presents: its key, counter,
 * transports and user (the assertion's user handle must be that user's id).
 * Status: ok | not_found.
 */
drop function if exists auth.passkey_for_credential(bytea);
create function auth.passkey_for_credential(credential_id bytea,
    out status text, out passkey_id uuid, out user_id uuid, out public_key bytea, out sign_count bigint, out transports text[])
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  select p.id, p.user_id, p.public_key, p.sign_count, p.transports into passkey_id, user_id, public_key, sign_count, transports
    from auth.passkeys p where p.credential_id = passkey_for_credential.credential_id;
  status := case when found then 'ok' else 'not_found' end;
end
$$;
comment on function auth.passkey_for_credential(bytea) is E'The passkey of a credential id, for verifying an assertion. Status: ok | not_found.';

/*
 * why: a verified assertion becomes a session, in one transaction: the counter moves on
 * (refused when it does not grow, see above), last_used_at is set, and the session opens
 * at aal1 with amr `passkey` (auth.start_session, which refuses a banned user). Under the
 * passkey's row lock, two sign-ins with one counter value cannot both pass.
 * Status: ok | not_found (the passkey was deleted meanwhile) | counter (cloned authenticator;
 * audited as passkey_counter_rejected) | user_not_found.
 */
drop function if exists auth.passkey_sign_in(uuid, bigint, bytea, integer, jsonb);
create function auth.passkey_sign_in(passkey_id uuid, new_sign_count bigint, refresh_token_hash bytea, ttl_seconds integer,
    context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v auth.passkeys;
begin
  select * into v from auth.passkeys p where p.id = passkey_sign_in.passkey_id for update;
  if not found then
    return auth_private.session_status('not_found');
  end if;
  if (v.sign_count > 0 or passkey_sign_in.new_sign_count > 0) and passkey_sign_in.new_sign_count <= v.sign_count then
    perform auth_private.audit('passkey_counter_rejected', v.user_id, passkey_sign_in.context,
      jsonb_build_object('passkey_id', v.id, 'stored', v.sign_count, 'presented', passkey_sign_in.new_sign_count));
    return auth_private.session_status('counter');
  end if;
  update auth.passkeys p set sign_count = passkey_sign_in.new_sign_count, last_used_at = now() where p.id = v.id;
  return auth.start_session(v.user_id, passkey_sign_in.refresh_token_hash, passkey_sign_in.ttl_seconds, null, 'passkey',
    passkey_sign_in.context);
end
$$;
comment on function auth.passkey_sign_in(uuid, bigint, bytea, integer, jsonb) is E'Record a verified passkey sign-in (counter, last use) and open an aal1 session with amr passkey. Status: ok | not_found | counter | user_not_found.';

/* why: GET /auth/v1/passkeys and the admin's list: a user's passkeys, oldest first; null when there is no such user. */
create or replace function auth.passkey_list(user_id uuid) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select case when exists (select 1 from auth.users u where u.id = passkey_list.user_id) then
    (select coalesce(jsonb_agg(auth_private.passkey_json(p) order by p.created_at, p.id), '[]'::jsonb)
      from auth.passkeys p where p.user_id = passkey_list.user_id)
  end
$$;
comment on function auth.passkey_list(uuid) is E'A user''s passkeys as a JSON array, oldest first; null for an unknown user.';

/* why: DELETE /auth/v1/admin/users/{id}/passkeys/{passkey_id}: the service role removes a passkey (no aal rule); audited. Status: ok | not_found. */
create or replace function auth.passkey_admin_delete(user_id uuid, passkey_id uuid, context jsonb default null) returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_id uuid;
begin
  delete from auth.passkeys p where p.id = passkey_admin_delete.passkey_id and p.user_id = passkey_admin_delete.user_id returning p.id into v_id;
  if not found then
    return 'not_found';
  end if;
  perform auth_private.audit('passkey_deleted', passkey_admin_delete.user_id, passkey_admin_delete.context,
    jsonb_build_object('passkey_id', v_id, 'by', 'admin'));
  return 'ok';
end
$$;
comment on function auth.passkey_admin_delete(uuid, uuid, jsonb) is E'The service role deletes a user''s passkey; audited (by admin). Status: ok | not_found.';

/*
 * why: PATCH (rename) and DELETE of a user's own passkey; another user's passkey is
 * `not_found`, as an unknown id. Deleting needs aal2 when the user has a verified factor
 * and is audited as passkey_deleted.
 * Status: ok | not_found (| aal2_required, delete).
 */
drop function if exists auth.passkey_rename(uuid, uuid, text, jsonb);
create function auth.passkey_rename(user_id uuid, passkey_id uuid, friendly_name text, context jsonb default null,
    out status text, out passkey jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v auth.passkeys;
begin
  update auth.passkeys p set friendly_name = passkey_rename.friendly_name
    where p.id = passkey_rename.passkey_id and p.user_id = passkey_rename.user_id
    returning * into v;
  if not found then
    status := 'not_found';
    return;
  end if;
  perform auth_private.audit('passkey_updated', v.user_id, passkey_rename.context, jsonb_build_object('passkey_id', v.id));
  status := 'ok';
  passkey := auth_private.passkey_json(v);
end
$$;
comment on function auth.passkey_rename(uuid, uuid, text, jsonb) is E'Rename a user''s passkey; audited. Status: ok | not_found.';

drop function if exists auth.passkey_delete(uuid, uuid, jsonb);
drop function if exists auth.passkey_delete(uuid, uuid, text, jsonb);
create function auth.passkey_delete(user_id uuid, passkey_id uuid, aal text, context jsonb default null) returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_id uuid;
begin
  if auth_private.passkey_needs_aal2(passkey_delete.user_id, passkey_delete.aal) then
    return 'aal2_required';
  end if;
  delete from auth.passkeys p where p.id = passkey_delete.passkey_id and p.user_id = passkey_delete.user_id returning p.id into v_id;
  if not found then
    return 'not_found';
  end if;
  perform auth_private.audit('passkey_deleted', passkey_delete.user_id, passkey_delete.context, jsonb_build_object('passkey_id', v_id));
  return 'ok';
end
$$;
comment on function auth.passkey_delete(uuid, uuid, text, jsonb) is E'Delete a user''s passkey (aal2 when a factor is verified); audited. Status: ok | not_found | aal2_required.';

revoke all on function auth.passkey_challenge(text, uuid, text, integer, integer), auth.passkey_consume_challenge(uuid, text, uuid),
  auth.passkey_register(uuid, bytea, bytea, bigint, text[], text, uuid, boolean, boolean, integer, jsonb),
  auth.passkey_for_credential(bytea), auth.passkey_sign_in(uuid, bigint, bytea, integer, jsonb), auth.passkey_list(uuid),
  auth.passkey_rename(uuid, uuid, text, jsonb), auth.passkey_delete(uuid, uuid, text, jsonb), auth.passkey_admin_delete(uuid, uuid, jsonb)
  from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
--! EndIncluded auth/passkeys.sql
