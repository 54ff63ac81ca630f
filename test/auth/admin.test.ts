/**
 * Auth admin (interface §4.2 "Auth admin", contract §9): service_role only; list,
 * create (role, email_confirm, optional password, unknown fields ignored, 409, 400) and
 * delete (204, 404 user not found, 400 malformed UUID).
 */
import t from 'tap';
import { ISO_UTC, PASSWORD, signIn, signUp, startAuthApp, uniqueEmail } from './helpers.ts';

t.test('auth admin', async (t) => {
  const app = await startAuthApp(t, { worker: false });
  const svc = { token: app.serviceKey };

  t.test('service_role only', async (t) => {
    const { session } = await signUp(app);
    const paths: [string, string][] = [
      ['GET', '/auth/v1/admin/users'],
      ['POST', '/auth/v1/admin/users'],
      ['DELETE', `/auth/v1/admin/users/${session.user.id}`],
    ];
    for (const [method, path] of paths) {
      const body = method === 'POST' ? { email: uniqueEmail() } : undefined;
      const none = await app.call(method, path, { body });
      t.equal(none.status, 401, `${method} without credentials`);
      t.same(none.body, { error: 'missing credentials' });
      for (const token of [app.anonKey, session.access_token]) {
        const r = await app.call(method, path, { token, body });
        t.equal(r.status, 403, `${method} as ${token === app.anonKey ? 'anon' : 'a user'}`);
        t.same(r.body, { error: 'service role required' });
      }
      const bad = await app.call(method, path, { token: 'garbage' });
      t.equal(bad.status, 401);
      t.same(bad.body, { error: 'invalid or expired token' });
    }
    const viaApikey = await app.call('GET', '/auth/v1/admin/users', { apikey: app.serviceKey });
    t.equal(viaApikey.status, 200, 'the service-role key in the apikey header works too');
    t.equal((await app.call('GET', '/auth/v1/user', { token: session.access_token })).status, 200, 'the user was not deleted');
  });

  t.test('GET lists {id, email, role, created_at} per user, oldest first', async (t) => {
    const a = await signUp(app);
    const b = await signUp(app);
    const r = await app.call('GET', '/auth/v1/admin/users', svc);
    t.equal(r.status, 200);
    t.ok(Array.isArray(r.body));
    for (const u of r.body) t.same(Object.keys(u).sort(), ['created_at', 'email', 'id', 'role']);
    const ia = r.body.findIndex((u: { id: string }) => u.id === a.session.user.id);
    const ib = r.body.findIndex((u: { id: string }) => u.id === b.session.user.id);
    t.ok(ia >= 0 && ib > ia);
    t.same(r.body[ia], { id: a.session.user.id, email: a.email, role: 'authenticated', created_at: a.session.user.created_at });
    t.match(r.body[ia].created_at, ISO_UTC);
  });

  t.test('POST creates a User: 201, default role authenticated, unknown fields ignored', async (t) => {
    const email = uniqueEmail('adm');
    const r = await app.call('POST', '/auth/v1/admin/users', { ...svc, body: { email, password: PASSWORD, user_metadata: { x: 1 }, data: { y: 2 }, banana: true } });
    t.equal(r.status, 201);
    t.same(Object.keys(r.body).sort(), ['created_at', 'email', 'id', 'role', 'updated_at', 'user_metadata']);
    t.equal(r.body.email, email);
    t.equal(r.body.role, 'authenticated');
    t.same(r.body.user_metadata, {}, 'no metadata field on admin create');
    const s = await signIn(app, email);
    t.equal(s.status, 200, 'the password signs in');
    t.equal(s.body.user.id, r.body.id);
  });

  t.test('POST role: anon, authenticated, service_role; the sessions carry it', async (t) => {
    for (const role of ['anon', 'authenticated', 'service_role']) {
      const email = uniqueEmail(role.replace('_', '-'));
      const r = await app.call('POST', '/auth/v1/admin/users', { ...svc, body: { email, password: PASSWORD, role } });
      t.equal(r.status, 201, role);
      t.equal(r.body.role, role);
      const s = await signIn(app, email);
      t.equal(s.body.user.role, role);
    }
    for (const role of ['admin', 'anonymous', 'postgres', '', 5]) {
      const r = await app.call('POST', '/auth/v1/admin/users', { ...svc, body: { email: uniqueEmail(), role } });
      t.equal(r.status, 400, `role ${JSON.stringify(role)}`);
      t.same(r.body, { error: 'invalid request body' });
    }
  });

  t.test('POST validation and conflicts', async (t) => {
    const { email } = await signUp(app);
    const dup = await app.call('POST', '/auth/v1/admin/users', { ...svc, body: { email: email.toUpperCase() } });
    t.equal(dup.status, 409);
    t.same(dup.body, { error: 'email already registered' });
    const bad = await app.call('POST', '/auth/v1/admin/users', { ...svc, body: { email: 'bad address' } });
    t.equal(bad.status, 400);
    t.same(bad.body, { error: 'invalid email address' });
    const short = await app.call('POST', '/auth/v1/admin/users', { ...svc, body: { email: uniqueEmail(), password: 'short' } });
    t.equal(short.status, 400);
    t.same(short.body, { error: 'password must be at least 8 characters' });
    const long = await app.call('POST', '/auth/v1/admin/users', { ...svc, body: { email: uniqueEmail(), password: 'p'.repeat(257) } });
    t.equal(long.status, 400);
    t.same(long.body, { error: 'password must be at most 256 characters' });
    for (const body of [{}, { email: 1 }, { email: uniqueEmail(), email_confirm: 'yes' }, { email: uniqueEmail(), password: 12345678 }]) {
      const r = await app.call('POST', '/auth/v1/admin/users', { ...svc, body });
      t.equal(r.status, 400, JSON.stringify(body));
      t.same(r.body, { error: 'invalid request body' });
    }
  });

  t.test('POST without a password: the account cannot sign in with one', async (t) => {
    const email = uniqueEmail('nopw');
    t.equal((await app.call('POST', '/auth/v1/admin/users', { ...svc, body: { email } })).status, 201);
    const r = await signIn(app, email, 'anything at all');
    t.equal(r.status, 401);
    t.same(r.body, { error: 'invalid email or password' });
  });

  t.test('POST email_confirm sets the confirmation', async (t) => {
    const yes = uniqueEmail('c1');
    const no = uniqueEmail('c0');
    await app.call('POST', '/auth/v1/admin/users', { ...svc, body: { email: yes, email_confirm: true } });
    await app.call('POST', '/auth/v1/admin/users', { ...svc, body: { email: no } });
    const rows = await app.db.sql`select email, email_confirmed_at is not null as confirmed from auth.users where email in (${yes}, ${no}) order by email`;
    t.same(Object.fromEntries(rows.map((r) => [r.email, r.confirmed])), { [yes]: true, [no]: false });
  });

  t.test('DELETE: 204, then 404 user not found; 400 for a malformed UUID', async (t) => {
    const { session } = await signUp(app);
    const del = await app.call('DELETE', `/auth/v1/admin/users/${session.user.id}`, svc);
    t.equal(del.status, 204);
    t.equal(del.text, '');
    const [{ n }] = await app.db.sql`select count(*)::int as n from auth_private.sessions where user_id = ${session.user.id}`;
    t.equal(n, 0, 'its sessions went with it');
    const again = await app.call('DELETE', `/auth/v1/admin/users/${session.user.id}`, svc);
    t.equal(again.status, 404);
    t.same(again.body, { error: 'user not found' });
    const unknown = await app.call('DELETE', '/auth/v1/admin/users/00000000-0000-4000-8000-000000000000', svc);
    t.equal(unknown.status, 404);
    t.same(unknown.body, { error: 'user not found' });
    for (const id of ['not-a-uuid', '1234', `${session.user.id}x`, 'zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz']) {
      const r = await app.call('DELETE', `/auth/v1/admin/users/${id}`, svc);
      t.equal(r.status, 400, id);
      t.same(r.body, { error: 'invalid user id' });
    }
  });

  t.test('an application table may reference auth.users(id)', async (t) => {
    const { session } = await signUp(app);
    await app.db.sql`create table public.profiles (user_id uuid primary key references auth.users (id) on delete cascade, bio text)`;
    await app.db.sql`insert into public.profiles values (${session.user.id}, 'hi')`;
    t.equal((await app.call('DELETE', `/auth/v1/admin/users/${session.user.id}`, svc)).status, 204);
    const [{ n }] = await app.db.sql`select count(*)::int as n from public.profiles`;
    t.equal(n, 0);
  });
});
