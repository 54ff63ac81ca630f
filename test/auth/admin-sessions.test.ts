/**
 * The admin routes over a user's sessions and address: GET /auth/v1/admin/users/{id}/sessions,
 * DELETE …/sessions/{session_id} (the family's refresh tokens stop at once), and
 * PUT /auth/v1/admin/users/{id} with email_confirm. Service role only.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, uniqueEmail } from './helpers.ts';

const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '0' } });
const svc = { token: app.serviceKey };
const email = uniqueEmail('sess');
const signup = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
const userId: string = signup.body.user.id;
const second = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email, password: PASSWORD } });

t.test('a user\'s sessions, newest first; ending one stops its refresh tokens', async (t) => {
  const list = await app.call('GET', `/auth/v1/admin/users/${userId}/sessions`, svc);
  t.equal(list.status, 200);
  t.equal(list.body.length, 2);
  t.same(Object.keys(list.body[0]).sort(), ['created_at', 'expires_at', 'id', 'refreshed_at', 'revoked_at', 'revoked_reason']);
  const sessionOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).session_id as string;
  t.equal(list.body[0].id, sessionOf(second.body.access_token), 'newest first');
  const end = await app.call('DELETE', `/auth/v1/admin/users/${userId}/sessions/${list.body[0].id}`, svc);
  t.same([end.status, end.body], [200, { message: 'session revoked' }]);
  const refresh = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'refresh_token', refresh_token: second.body.refresh_token } });
  t.same([refresh.status, refresh.body], [401, { error: 'invalid refresh token' }], 'the ended family refreshes no more');
  const other = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'refresh_token', refresh_token: signup.body.refresh_token } });
  t.equal(other.status, 200, 'the other session lives on');
  const again = await app.call('DELETE', `/auth/v1/admin/users/${userId}/sessions/${list.body[0].id}`, svc);
  t.same([again.status, again.body], [404, { error: 'session not found' }]);
  const after = await app.call('GET', `/auth/v1/admin/users/${userId}/sessions`, svc);
  t.equal(after.body.find((s: { id: string }) => s.id === list.body[0].id).revoked_reason, 'admin');
});

t.test('confirming an address by hand', async (t) => {
  const made = await app.call('POST', '/auth/v1/admin/users', { ...svc, body: { email: uniqueEmail('unconfirmed') } });
  const confirmedAt = async () => (await app.db.sql`select email_confirmed_at from auth.users where id = ${made.body.id}`)[0].email_confirmed_at;
  t.equal(await confirmedAt(), null);
  const put = await app.call('PUT', `/auth/v1/admin/users/${made.body.id}`, { ...svc, body: { email_confirm: true } });
  t.equal(put.status, 200);
  t.equal(put.body.id, made.body.id, 'the User object');
  t.type(await confirmedAt(), Date, 'the address counts as confirmed');
  await app.call('PUT', `/auth/v1/admin/users/${made.body.id}`, { ...svc, body: { email_confirm: false } });
  t.equal(await confirmedAt(), null, 'and back');
  const bad = await app.call('PUT', `/auth/v1/admin/users/${made.body.id}`, { ...svc, body: { email_confirm: 'yes' } });
  t.same([bad.status, bad.body], [400, { error: 'invalid request body' }]);
});

t.test('bad ids, unknown users, and the service role only', async (t) => {
  const unknown = '00000000-0000-4000-8000-000000000000';
  const cases: [string, string, number, string][] = [
    ['GET', '/auth/v1/admin/users/nope/sessions', 400, 'invalid user id'],
    ['GET', `/auth/v1/admin/users/${unknown}/sessions`, 404, 'user not found'],
    ['DELETE', `/auth/v1/admin/users/${userId}/sessions/nope`, 400, 'invalid session id'],
    ['DELETE', `/auth/v1/admin/users/${userId}/sessions/${unknown}`, 404, 'session not found'],
    ['PUT', `/auth/v1/admin/users/${unknown}`, 404, 'user not found'],
  ];
  for (const [method, path, status, error] of cases) {
    const r = await app.call(method, path, { ...svc, body: method === 'PUT' ? { email_confirm: true } : undefined });
    t.same([r.status, r.body], [status, { error }], `${method} ${path}`);
  }
  for (const token of [app.anonKey, signup.body.access_token]) {
    const r = await app.call('GET', `/auth/v1/admin/users/${userId}/sessions`, { token });
    t.same([r.status, r.body], [403, { error: 'service role required' }]);
  }
});
