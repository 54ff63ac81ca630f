/**
 * An admin's second factor over real HTTP: a service_role account with a verified TOTP
 * factor, signed in with its password alone (aal1), is refused by every service-role route
 * (403 `insufficient_aal`) and cannot change its password or email until aal2; the
 * service-role key is not affected. Also: the caller's X-Request-Id never becomes the id of
 * its own audit entries.
 */
import t from 'tap';
import * as OTPAuth from 'otpauth';
import { jwtPayload, PASSWORD, signIn, signUp, startAuthApp, uniqueEmail } from './helpers.ts';
import { open, refused } from '../live/helpers.ts';
import { createTestDatabase } from '../helpers/database.ts';

// A table of the application's, made as a DBA's migration would (the service role reaches it by default).
const db = await createTestDatabase(t);
await db.sql`create table public.admin_aal_items (id serial primary key, title text)`;
const app = await startAuthApp(t, { env: { ENABLE_SQL_ENDPOINT: 'true' }, db });

/** Codes near a step boundary could be judged one step later by the server: start well inside a step. */
async function insideStep(): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() % 30_000 > 22_000) {
    if (Date.now() > deadline) throw new Error('no step start');
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Enrol and verify a TOTP factor with `token`: the aal2 session and a code generator. */
async function enrolTotp(token: string): Promise<{ factorId: string; totp: OTPAuth.TOTP; aal2: string }> {
  const e = await app.call('POST', '/auth/v1/factors', { token, body: { factor_type: 'totp' } });
  if (e.status !== 200) throw new Error(`enrol: ${e.status} ${e.text}`);
  const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(e.body.totp.secret), algorithm: 'SHA1', digits: 6, period: 30 });
  await insideStep();
  const c = await app.call('POST', `/auth/v1/factors/${e.body.id}/challenge`, { token });
  const v = await app.call('POST', `/auth/v1/factors/${e.body.id}/verify`, { token, body: { challenge_id: c.body.id, code: totp.generate() } });
  if (v.status !== 200) throw new Error(`verify: ${v.status} ${v.text}`);
  return { factorId: e.body.id, totp, aal2: v.body.access_token };
}

const email = uniqueEmail('admin');
const made = await app.call('POST', '/auth/v1/admin/users', { token: app.serviceKey, body: { email, password: PASSWORD, email_confirm: true, role: 'service_role' } });
if (made.status !== 201) throw new Error(`admin create: ${made.status} ${made.text}`);
const adminId: string = made.body.id;

t.test('an admin without a factor passes at aal1 (nothing more to prove)', async (t) => {
  const s = await signIn(app, email);
  t.equal(jwtPayload(s.body.access_token).aal, 'aal1');
  const r = await app.call('GET', '/auth/v1/admin/users', { token: s.body.access_token });
  t.equal(r.status, 200);
  t.equal((await app.call('GET', '/rest/v1/admin_aal_items?select=id', { token: s.body.access_token, apikey: app.anonKey })).status, 200, 'and REST');
});

t.test("the admin's password alone no longer passes a service-role route once a factor is verified", async (t) => {
  const first = await signIn(app, email);
  const { factorId, aal2 } = await enrolTotp(first.body.access_token);
  const aal1 = (await signIn(app, email)).body.access_token as string;
  t.equal(jwtPayload(aal1).aal, 'aal1', 'a password sign-in is aal1');
  t.equal(jwtPayload(aal1).role, 'service_role');

  // The attack: delete its own factor through the admin API, then run SQL.
  const del = await app.call('DELETE', `/auth/v1/admin/users/${adminId}/factors/${factorId}`, { token: aal1 });
  t.same([del.status, del.body], [403, { error: 'insufficient_aal' }], 'the admin API refuses to delete the factor at aal1');
  const sql = await app.call('POST', '/api/sql', { token: aal1, body: { query: 'select 1 as one' } });
  t.same([sql.status, sql.body], [403, { error: 'insufficient_aal' }], '/api/sql refuses aal1');
  for (const [method, path] of [
    ['GET', '/auth/v1/admin/users'],
    ['GET', `/auth/v1/admin/users/${adminId}/factors`],
    ['GET', '/auth/v1/admin/audit'],
    ['GET', '/rest/v1/webhooks'],
    ['GET', '/api/requests'],
  ] as const) {
    const r = await app.call(method, path, { token: aal1 });
    t.same([r.status, r.body], [403, { error: 'insufficient_aal' }], `${method} ${path} at aal1`);
  }
  // Nor does it act as the service role elsewhere (REST bypasses row-level security as service_role).
  const rest = await app.call('GET', '/rest/v1/admin_aal_items?select=id', { token: aal1, apikey: app.anonKey });
  t.same([rest.status, rest.body], [403, { error: 'insufficient_aal' }], 'REST refuses aal1 too');
  const buckets = await app.call('GET', '/storage/v1/bucket', { token: aal1 });
  t.same([buckets.status, buckets.body], [403, { error: 'insufficient_aal' }], 'and storage');
  t.equal((await app.call('GET', '/rest/v1/admin_aal_items?select=id', { token: aal2, apikey: app.anonKey })).status, 200, 'REST at aal2');
  await app.db.sql`select live.subscribe('admin_aal_items', 'select id from public.admin_aal_items')`;
  const ws = await refused(app, '/ws/admin_aal_items', { headers: { authorization: `Bearer ${aal1}` } });
  t.same(ws, { status: 403, body: { error: 'insufficient_aal' } }, 'a live query refuses aal1 before the upgrade');
  const live = await open(app, '/ws/admin_aal_items', { headers: { authorization: `Bearer ${aal2}` } });
  live.close();
  const [{ n }] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from auth_private.mfa_factors where id = ${factorId}`;
  t.equal(n, 1, 'the factor is still there');

  t.equal((await app.call('GET', '/auth/v1/admin/users', { token: aal2 })).status, 200, 'aal2 passes');
  t.same((await app.call('POST', '/api/sql', { token: aal2, body: { query: 'select 1 as one' } })).body, [{ one: 1 }], '/api/sql at aal2');
  t.equal((await app.call('GET', '/auth/v1/admin/users', { token: app.serviceKey })).status, 200, 'the service-role key is unchanged');
  const user = await signUp(app);
  const other = await app.call('GET', '/auth/v1/admin/users', { token: user.session.access_token });
  t.same([other.status, other.body], [403, { error: 'service role required' }], 'another role: still 403 service role required');
});

t.test('an aal1 session of a user with a verified factor cannot change the password or the email', async (t) => {
  const u = await signUp(app, uniqueEmail('mfa-user'));
  const { aal2 } = await enrolTotp(u.session.access_token);
  const aal1 = (await signIn(app, u.email)).body.access_token as string;

  const pw = await app.call('PATCH', '/auth/v1/user', { token: aal1, body: { password: 'a stolen password change' } });
  t.same([pw.status, pw.body], [403, { error: 'insufficient_aal' }], 'password at aal1');
  const em = await app.call('PATCH', '/auth/v1/user', { token: aal1, body: { email: uniqueEmail('thief') } });
  t.same([em.status, em.body], [403, { error: 'insufficient_aal' }], 'email at aal1');
  t.equal((await signIn(app, u.email)).status, 200, 'the password still works, the address is the same');
  const same = await app.call('PATCH', '/auth/v1/user', { token: aal1, body: { email: u.email.toUpperCase() } });
  t.equal(same.status, 200, 'the same address in another case is no change');
  const data = await app.call('PATCH', '/auth/v1/user', { token: aal1, body: { data: { theme: 'dark' } } });
  t.equal(data.status, 200, 'metadata alone needs no aal2');

  const ok = await app.call('PATCH', '/auth/v1/user', { token: aal2, body: { password: 'a proper new password' } });
  t.equal(ok.status, 200, 'aal2 changes the password');
  t.equal((await signIn(app, u.email, 'a proper new password')).status, 200);
  // Without a factor nothing changes: aal1 may change both.
  const plain = await signUp(app);
  t.equal((await app.call('PATCH', '/auth/v1/user', { token: plain.session.access_token, body: { password: 'another password' } })).status, 200);
});

t.test("the caller's X-Request-Id is echoed but is not the id of its audit entries", async (t) => {
  const u = await signUp(app);
  const chosen = 'forged-audit-id-0001';
  const r = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email: u.email, password: PASSWORD }, headers: { 'x-request-id': chosen } });
  t.equal(r.status, 200);
  t.equal(r.headers.get('x-request-id'), chosen, 'a valid client id is still echoed');
  const audit = await app.call('GET', `/auth/v1/admin/audit?user_id=${u.session.user.id}&action=sign_in`, { token: app.serviceKey });
  t.equal(audit.body.length, 2, 'the sign-up and the sign-in');
  const entry = audit.body.find((e: { client_request_id: string | null }) => e.client_request_id === chosen);
  t.ok(entry, "the caller's id is kept as client_request_id");
  t.not(entry?.request_id, chosen, 'request_id is the service own');
  t.match(entry?.request_id, /^[0-9a-f-]{36}$/, 'a UUID');
  t.equal(audit.body.filter((e: { request_id: string }) => e.request_id === chosen).length, 0, 'no entry carries the chosen id as its request id');
  const plain = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email: u.email, password: PASSWORD } });
  const entries = await app.call('GET', `/auth/v1/admin/audit?user_id=${u.session.user.id}&action=sign_in`, { token: app.serviceKey });
  const own = entries.body.find((e: { request_id: string }) => e.request_id === plain.headers.get('x-request-id'));
  t.ok(own, 'without a client id, the audit entry has the id the answer carried');
  t.equal(own?.client_request_id, null);
});
