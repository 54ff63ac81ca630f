/**
 * GET and PATCH /auth/v1/user (interface §4.2, contract §3 and §9): level JWT, the User
 * object, email change at once (409, 400), password 8–256, data merged into user_metadata.
 */
import t from 'tap';
import { PASSWORD, signIn, signUp, startAuthApp, uniqueEmail } from './helpers.ts';

t.test('the signed-in user', async (t) => {
  const app = await startAuthApp(t, { worker: false });

  t.test('GET needs a user access token: 401 invalid or expired token otherwise', async (t) => {
    const cases: [string, Parameters<typeof app.call>[2]][] = [
      ['no credential', {}],
      ['anon key', { token: app.anonKey }],
      ['service-role key', { token: app.serviceKey }],
      ['garbage', { token: 'garbage' }],
      ['apikey header only', { apikey: app.anonKey }],
    ];
    for (const [name, opts] of cases) {
      const r = await app.call('GET', '/auth/v1/user', opts);
      t.equal(r.status, 401, name);
      t.same(r.body, { error: 'invalid or expired token' }, name);
    }
  });

  t.test('GET answers the User object', async (t) => {
    const { session } = await signUp(app, uniqueEmail(), PASSWORD, { theme: 'dark' });
    const r = await app.call('GET', '/auth/v1/user', { token: session.access_token });
    t.equal(r.status, 200);
    t.same(r.body, session.user);
    t.same(r.body.user_metadata, { theme: 'dark' });
  });

  t.test('GET for a deleted user → 404 user not found (the access token itself is still valid)', async (t) => {
    const { session } = await signUp(app);
    await app.call('DELETE', `/auth/v1/admin/users/${session.user.id}`, { token: app.serviceKey });
    const r = await app.call('GET', '/auth/v1/user', { token: session.access_token });
    t.equal(r.status, 404);
    t.same(r.body, { error: 'user not found' });
  });

  t.test('PATCH data merges top-level keys into user_metadata; null removes a key', async (t) => {
    const { session } = await signUp(app, uniqueEmail(), PASSWORD, { a: 1, b: { x: 1 }, c: 3 });
    const r = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body: { data: { b: { y: 2 }, c: null, d: 'new' } } });
    t.equal(r.status, 200);
    t.same(r.body.user_metadata, { a: 1, b: { y: 2 }, d: 'new' });
    t.ok(r.body.updated_at >= session.user.updated_at);
    t.same((await app.call('GET', '/auth/v1/user', { token: session.access_token })).body, r.body, 'persisted');
  });

  t.test('PATCH email changes the address at once; the new address signs in', async (t) => {
    const { session } = await signUp(app);
    const next = uniqueEmail('Next');
    const r = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body: { email: next } });
    t.equal(r.status, 200);
    t.equal(r.body.email, next.toLowerCase());
    t.equal((await signIn(app, next)).status, 200);
  });

  t.test('PATCH email: 409 email already registered, 400 invalid email address', async (t) => {
    const { email: taken } = await signUp(app);
    const { session } = await signUp(app);
    const dup = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body: { email: taken.toUpperCase() } });
    t.equal(dup.status, 409);
    t.same(dup.body, { error: 'email already registered' });
    const bad = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body: { email: 'not valid' } });
    t.equal(bad.status, 400);
    t.same(bad.body, { error: 'invalid email address' });
    const same = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body: { email: session.user.email!.toUpperCase() } });
    t.equal(same.status, 200, 'one\'s own address in another case is no conflict');
  });

  t.test('PATCH password: 8–256 characters; the new one signs in', async (t) => {
    const { email, session } = await signUp(app);
    const short = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body: { password: 'short' } });
    t.equal(short.status, 400);
    t.same(short.body, { error: 'password must be at least 8 characters' });
    const long = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body: { password: 'l'.repeat(257) } });
    t.equal(long.status, 400);
    t.same(long.body, { error: 'password must be at most 256 characters' });
    const ok = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body: { password: 'the new password' } });
    t.equal(ok.status, 200);
    t.equal((await signIn(app, email, PASSWORD)).status, 401);
    t.equal((await signIn(app, email, 'the new password')).status, 200);
  });

  t.test('PATCH: nothing changes on a failed update (email taken with a new password)', async (t) => {
    const { email: taken } = await signUp(app);
    const { email, session } = await signUp(app);
    const r = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body: { email: taken, password: 'another password' } });
    t.equal(r.status, 409);
    t.equal((await signIn(app, email, PASSWORD)).status, 200, 'old password kept');
  });

  t.test('PATCH: malformed bodies → 400 invalid request body; no token → 401 before the body is looked at', async (t) => {
    const { session } = await signUp(app);
    for (const body of [{ email: 1 }, { password: true }, { data: 'x' }, { data: [1] }, []]) {
      const r = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body });
      t.equal(r.status, 400, JSON.stringify(body));
      t.same(r.body, { error: 'invalid request body' });
    }
    const none = await app.call('PATCH', '/auth/v1/user', { token: session.access_token });
    t.equal(none.status, 400, 'a body is required');
    const anon = await app.call('PATCH', '/auth/v1/user', { raw: '{bad', headers: { 'content-type': 'application/json' } });
    t.equal(anon.status, 401);
    t.same(anon.body, { error: 'invalid or expired token' });
    const empty = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body: {} });
    t.equal(empty.status, 200);
    t.same(empty.body, session.user, 'an empty update changes nothing');
  });
});
