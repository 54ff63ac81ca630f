/**
 * Guests (interface §4.2, §5.6, contract §3): ALLOW_ANONYMOUS_SIGNIN, ANONYMOUS_ROLE, the
 * is_anonymous claim, and their own per-IP limit ANONYMOUS_RATE_LIMIT per hour.
 */
import t from 'tap';
import postgres from 'postgres';
import { serverUrl } from '../helpers/database.ts';
import { jwtPayload, refresh, startAuthApp } from './helpers.ts';

t.test('ALLOW_ANONYMOUS_SIGNIN unset → 503 anonymous sign-ins are disabled', async (t) => {
  const app = await startAuthApp(t, { worker: false });
  const r = await app.call('POST', '/auth/v1/anonymous');
  t.equal(r.status, 503);
  t.same(r.body, { error: 'anonymous sign-ins are disabled' });
  const [{ n }] = await app.db.sql`select count(*)::int as n from auth.users`;
  t.equal(n, 0, 'no user created');
});

t.test('ALLOW_ANONYMOUS_SIGNIN=false → 503', async (t) => {
  const app = await startAuthApp(t, { worker: false, env: { ALLOW_ANONYMOUS_SIGNIN: 'false' } });
  const r = await app.call('POST', '/auth/v1/anonymous', { body: {} });
  t.equal(r.status, 503);
  t.same(r.body, { error: 'anonymous sign-ins are disabled' });
});

t.test('ALLOW_ANONYMOUS_SIGNIN=true', async (t) => {
  const app = await startAuthApp(t, { worker: false, env: { ALLOW_ANONYMOUS_SIGNIN: 'true', ANONYMOUS_RATE_LIMIT: '0' } });

  t.test('201 Session: a real user, role ANONYMOUS_ROLE, is_anonymous true, email null', async (t) => {
    const r = await app.call('POST', '/auth/v1/anonymous');
    t.equal(r.status, 201);
    t.same(Object.keys(r.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type', 'user']);
    t.equal(r.body.user.email, null);
    t.equal(r.body.user.role, 'anonymous');
    t.same(r.body.user.user_metadata, {});
    const claims = jwtPayload(r.body.access_token);
    t.equal(claims.role, 'anonymous');
    t.equal(claims.is_anonymous, true);
    t.equal(claims.email, null);
    t.equal(claims.aud, 'authenticated');
    t.equal(claims.sub, r.body.user.id);
    const [row] = await app.db.sql`select is_anonymous, role, email from auth.users where id = ${r.body.user.id}`;
    t.same({ ...row }, { is_anonymous: true, role: 'anonymous', email: null }, 'a real user record');

    const me = await app.call('GET', '/auth/v1/user', { token: r.body.access_token });
    t.equal(me.status, 200);
    t.same(me.body, r.body.user);

    const next = await refresh(app, r.body.refresh_token);
    t.equal(next.status, 200, 'guests refresh like anyone');
    t.equal(jwtPayload(next.body.access_token).is_anonymous, true);
    t.equal(jwtPayload(next.body.access_token).role, 'anonymous');

    t.equal((await app.call('POST', '/auth/v1/logout', { token: next.body.access_token })).status, 204);
    t.same((await refresh(app, next.body.refresh_token)).body, { error: 'invalid refresh token' });
  });

  t.test('the guest token runs as the guest role in the database', async (t) => {
    const r = await app.call('POST', '/auth/v1/anonymous', { body: {} });
    const cred = await app.service.deps.credentials.verify(r.body.access_token);
    t.equal(cred.role, 'anonymous');
    const [row] = await app.service.db.withContext(cred, (c) => c`select current_user::text as u, auth.uid() as uid, auth.jwt() ->> 'is_anonymous' as anon`);
    t.same({ ...row }, { u: 'anonymous', uid: r.body.user.id, anon: 'true' });
  });

  t.test('optional data becomes user_metadata; malformed bodies → 400', async (t) => {
    const r = await app.call('POST', '/auth/v1/anonymous', { body: { data: { nickname: 'guest-1' } } });
    t.equal(r.status, 201);
    t.same(r.body.user.user_metadata, { nickname: 'guest-1' });
    for (const opts of [{ body: [] as unknown }, { body: { data: 'x' } }, { raw: '{', headers: { 'content-type': 'application/json' } }]) {
      const bad = await app.call('POST', '/auth/v1/anonymous', opts);
      t.equal(bad.status, 400);
      t.same(bad.body, { error: 'invalid request body' });
    }
  });

  t.test('ANONYMOUS_RATE_LIMIT=0 disables the guest limit', async (t) => {
    const results = await Promise.all(Array.from({ length: 35 }, () => app.call('POST', '/auth/v1/anonymous')));
    t.ok(results.every((r) => r.status === 201), '35 guests from one address in a row');
    const [{ n }] = await app.db.sql`select count(*)::int as n from auth_private.rate_limits`;
    t.equal(n, 0, 'nothing counted');
  });

  t.test('guests appear in the admin list with a null email', async (t) => {
    const r = await app.call('POST', '/auth/v1/anonymous');
    const list = await app.call('GET', '/auth/v1/admin/users', { token: app.serviceKey });
    t.same(list.body.find((u: { id: string }) => u.id === r.body.user.id), { id: r.body.user.id, email: null, role: 'anonymous', created_at: r.body.user.created_at });
  });
});

t.test('ANONYMOUS_RATE_LIMIT: own per-IP bucket, independent of AUTH_RATE_LIMIT', async (t) => {
  const app = await startAuthApp(t, {
    worker: false,
    env: { ALLOW_ANONYMOUS_SIGNIN: 'true', ANONYMOUS_RATE_LIMIT: '2', AUTH_RATE_LIMIT: '1', TRUST_PROXY: 'true' },
  });
  const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip } });
  t.equal((await app.call('POST', '/auth/v1/anonymous', from('198.51.100.1'))).status, 201);
  t.equal((await app.call('POST', '/auth/v1/anonymous', from('198.51.100.1'))).status, 201, 'guests do not count against AUTH_RATE_LIMIT=1');
  const third = await app.call('POST', '/auth/v1/anonymous', from('198.51.100.1'));
  t.equal(third.status, 429);
  t.same(third.body, { error: 'too many requests, try again later' });
  t.equal((await app.call('POST', '/auth/v1/anonymous', from('198.51.100.2'))).status, 201, 'another IP has its own count');
  const signup = await app.call('POST', '/auth/v1/signup', { ...from('198.51.100.1'), body: { email: 'g1@example.com', password: 'password1' } });
  t.equal(signup.status, 201, 'the auth bucket is separate');
  const [{ hits }] = await app.db.sql`select cardinality(hits) as hits from auth_private.rate_limits where bucket = 'anonymous' and ip = '198.51.100.1'`;
  t.equal(hits, 2, 'the refused request was not counted');
  const [{ n }] = await app.db.sql`select count(*)::int as n from auth.users where is_anonymous`;
  t.equal(n, 3, 'a refused request creates no user');
  // The window is an hour: move the counted hits 59 minutes back, still limited; 61 minutes, free again.
  await app.db.sql`update auth_private.rate_limits set hits = array(select h - interval '59 minutes' from unnest(hits) h) where bucket = 'anonymous' and ip = '198.51.100.1'`;
  t.equal((await app.call('POST', '/auth/v1/anonymous', from('198.51.100.1'))).status, 429, 'still inside the hour');
  await app.db.sql`update auth_private.rate_limits set hits = array(select h - interval '2 minutes' from unnest(hits) h) where bucket = 'anonymous' and ip = '198.51.100.1'`;
  t.equal((await app.call('POST', '/auth/v1/anonymous', from('198.51.100.1'))).status, 201, 'an hour later');
});

t.test('default ANONYMOUS_RATE_LIMIT is 30 per hour', async (t) => {
  const app = await startAuthApp(t, { worker: false, env: { ALLOW_ANONYMOUS_SIGNIN: 'true' } });
  const statuses: number[] = [];
  for (let i = 0; i < 31; i++) statuses.push((await app.call('POST', '/auth/v1/anonymous')).status);
  t.same(statuses.slice(0, 30), Array(30).fill(201));
  t.equal(statuses[30], 429);
});

t.test('ANONYMOUS_ROLE names the guest role', async (t) => {
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  t.teardown(() => admin.end());
  // Roles are cluster-wide; the migrations create the configured one (contract §2). Here the
  // template was migrated with `anonymous`, so the test creates the other one itself.
  await admin.unsafe(`do $$ begin
    if not exists (select 1 from pg_roles where rolname = 'plinth_guest') then create role plinth_guest nologin noinherit; end if;
  end $$`);
  const app = await startAuthApp(t, { worker: false, env: { ALLOW_ANONYMOUS_SIGNIN: 'true', ANONYMOUS_ROLE: 'plinth_guest' } });
  const r = await app.call('POST', '/auth/v1/anonymous');
  t.equal(r.status, 201);
  t.equal(r.body.user.role, 'plinth_guest');
  t.equal(jwtPayload(r.body.access_token).role, 'plinth_guest');
  t.equal((await app.call('GET', '/auth/v1/user', { token: r.body.access_token })).status, 200, 'the service accepts its own guest tokens');
});
