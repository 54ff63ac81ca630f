/**
 * TOTP multi-factor authentication and the audit log over real HTTP, one plinth for the
 * file. Codes are computed by the `otpauth` library from the secret the enrolment gave,
 * never by plinth's own code.
 */
import t from 'tap';
import { hkdfSync } from 'node:crypto';
import * as OTPAuth from 'otpauth';
import { createTestDatabase } from '../helpers/database.ts';
import { jwtPayload, PASSWORD, refresh, signIn, signUp, startAuthApp, uniqueEmail, type Session } from './helpers.ts';

const db = await createTestDatabase(t);
// A table only a second factor may read: the RLS policy asks auth.aal().
await db.sql.unsafe(`
  create table public.vault (id int primary key, secret text not null);
  alter table public.vault enable row level security;
  create policy vault_aal2 on public.vault for select to authenticated using (auth.aal() = 'aal2');
  grant select on public.vault to authenticated;
  insert into public.vault values (1, 'the launch codes');
`);
const app = await startAuthApp(t, { db });
const UA = 'mfa-test/1.0';

function totpOf(secret: string): OTPAuth.TOTP {
  return new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 });
}

/** The code `steps` steps away from now. */
function codeAt(totp: OTPAuth.TOTP, steps: number): string {
  return totp.generate({ timestamp: Date.now() + steps * 30_000 });
}

/** Codes near a step boundary could be judged one step later by the server: start well inside a step. */
async function insideStep(): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() % 30_000 > 22_000) {
    if (Date.now() > deadline) throw new Error('no step start');
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function enroll(token: string, friendly_name?: string) {
  const r = await app.call('POST', '/auth/v1/factors', {
    token,
    body: { factor_type: 'totp', ...(friendly_name ? { friendly_name } : {}) },
    headers: { 'user-agent': UA },
  });
  return r;
}

async function challengeAndVerify(token: string, factorId: string, code: string) {
  const c = await app.call('POST', `/auth/v1/factors/${factorId}/challenge`, { token });
  if (c.status !== 200) throw new Error(`challenge: ${c.status} ${c.text}`);
  return app.call('POST', `/auth/v1/factors/${factorId}/verify`, { token, body: { challenge_id: c.body.id, code }, headers: { 'user-agent': UA } });
}

const { email, session: first } = await signUp(app, uniqueEmail('mfa'));
const aal1: Session = first;
let aal2: Session;
let factorId: string;
let totp: OTPAuth.TOTP;

t.test('tokens carry aal1 and the method before a second factor', async (t) => {
  const p = jwtPayload(aal1.access_token);
  t.equal(p.aal, 'aal1');
  t.match(p.amr, [{ method: 'password', timestamp: Number }]);
  const vault = await app.call('GET', '/rest/v1/vault?select=secret', { token: aal1.access_token });
  t.same(vault.body, [], 'RLS requiring aal2 hides the row from an aal1 token');
});

t.test('enrol: GoTrue shape, otpauth URI, SVG QR code, secret encrypted at rest', async (t) => {
  t.equal((await app.call('POST', '/auth/v1/factors', { body: { factor_type: 'totp' } })).status, 401, 'a user token is needed');
  const bad = await app.call('POST', '/auth/v1/factors', { token: aal1.access_token, body: { factor_type: 'phone' } });
  t.same([bad.status, bad.body], [400, { error: 'factor_type must be totp' }]);
  const r = await enroll(aal1.access_token, 'phone app');
  t.equal(r.status, 200, 'answered 200', { body: r.text });
  t.equal(r.body.type, 'totp');
  t.equal(r.body.friendly_name, 'phone app');
  t.match(r.body.totp.secret, /^[A-Z2-7]{32}$/, '20 bytes, base32');
  t.match(r.body.totp.qr_code, /^data:image\/svg\+xml;utf-8,%3Csvg/, 'an SVG data URI (percent-encoded: a bare # would end it)');
  const parsed = OTPAuth.URI.parse(r.body.totp.uri) as OTPAuth.TOTP;
  t.equal(parsed.secret.base32, r.body.totp.secret, 'the URI carries the secret');
  t.equal(parsed.label, email, 'the account is the label');
  t.equal(parsed.issuer, 'localhost', 'the issuer defaults to the SITE_URL host');
  t.same([parsed.digits, parsed.period, parsed.algorithm], [6, 30, 'SHA1']);
  factorId = r.body.id;
  totp = totpOf(r.body.totp.secret);
  const [row] = await db.sql<{ secret: Buffer }[]>`select secret from auth_private.mfa_factors where id = ${factorId}`;
  const clear = Buffer.from(parsed.secret.bytes);
  t.equal(row.secret.length, 16 + 32, 'IV and one AES block pair');
  t.notOk(row.secret.includes(clear), 'the clear secret is not stored');
  const again = await enroll(aal1.access_token, 'phone app');
  t.same([again.status, again.body], [409, { error: 'a factor with this friendly name already exists' }]);
  const user = await app.call('GET', '/auth/v1/user', { token: aal1.access_token });
  t.match(user.body.factors, [{ id: factorId, friendly_name: 'phone app', factor_type: 'totp', status: 'unverified' }]);
});

t.test('verify: a wrong code is refused, a right one gives an aal2 session', async (t) => {
  await insideStep();
  const c = await app.call('POST', `/auth/v1/factors/${factorId}/challenge`, { token: aal1.access_token });
  t.equal(c.status, 200);
  t.match(c.body, { id: String, type: 'totp', expires_at: Number });
  t.ok(c.body.expires_at > Date.now() / 1000, 'expires in the future');
  const right = codeAt(totp, 0);
  const wrong = right === '000000' ? '111111' : '000000';
  const w = await app.call('POST', `/auth/v1/factors/${factorId}/verify`, { token: aal1.access_token, body: { challenge_id: c.body.id, code: wrong } });
  t.same([w.status, w.body], [400, { error: 'invalid code' }]);
  const v = await app.call('POST', `/auth/v1/factors/${factorId}/verify`, {
    token: aal1.access_token,
    body: { challenge_id: c.body.id, code: right },
    headers: { 'user-agent': UA },
  });
  t.equal(v.status, 200, 'answered 200', { body: v.text });
  aal2 = v.body;
  const p = jwtPayload(aal2.access_token);
  t.equal(p.aal, 'aal2');
  t.same(
    (p.amr as { method: string }[]).map((a) => a.method),
    ['password', 'totp'],
    'amr lists both methods',
  );
  t.equal(p.session_id, jwtPayload(aal1.access_token).session_id, 'the same session, raised');
  const again = await app.call('POST', `/auth/v1/factors/${factorId}/verify`, { token: aal1.access_token, body: { challenge_id: c.body.id, code: right } });
  t.same([again.status, again.body], [404, { error: 'challenge not found' }], 'a challenge is used once');
  const reuse = await challengeAndVerify(aal1.access_token, factorId, right);
  t.same([reuse.status, reuse.body], [400, { error: 'invalid code' }], 'a code is used once');
  const user = await app.call('GET', '/auth/v1/user', { token: aal2.access_token });
  t.equal(user.body.factors[0].status, 'verified');
  const vault = await app.call('GET', '/rest/v1/vault?select=secret', { token: aal2.access_token });
  t.same(vault.body, [{ secret: 'the launch codes' }], 'RLS requiring aal2 shows the row to an aal2 token');
});

t.test('a refresh keeps aal2; the aal1 refresh token is retired', async (t) => {
  const r = await refresh(app, aal2.refresh_token);
  t.equal(r.status, 200, 'answered 200', { body: r.text });
  t.equal(jwtPayload(r.body.access_token).aal, 'aal2');
  t.same(
    (jwtPayload(r.body.access_token).amr as { method: string }[]).map((a) => a.method),
    ['password', 'totp'],
  );
  aal2 = r.body;
  const old = await refresh(app, aal1.refresh_token);
  t.equal(old.status, 401, 'the aal1 refresh token cannot be traded for the raised session');
});

t.test('drift: one step either way accepted, two refused', async (t) => {
  // A fresh session (the replay above ended the family) and a second factor (aal2 needed to add it).
  const s = await signIn(app, email);
  t.equal(s.status, 200);
  const up = await challengeAndVerify(s.body.access_token, factorId, codeAt(totp, 1));
  t.equal(up.status, 200, 'one step ahead on the first factor', { body: up.text });
  aal2 = up.body;
  const e = await enroll(aal2.access_token, 'second');
  t.equal(e.status, 200, 'answered 200', { body: e.text });
  const f2 = e.body.id as string;
  const totp2 = totpOf(e.body.totp.secret);
  await insideStep();
  t.equal((await challengeAndVerify(aal2.access_token, f2, codeAt(totp2, -2))).status, 400, 'two steps behind: refused');
  t.equal((await challengeAndVerify(aal2.access_token, f2, codeAt(totp2, 2))).status, 400, 'two steps ahead: refused');
  const behind = await challengeAndVerify(aal2.access_token, f2, codeAt(totp2, -1));
  t.equal(behind.status, 200, 'one step behind: accepted');
  const ahead = await challengeAndVerify(behind.body.access_token, f2, codeAt(totp2, 1));
  t.equal(ahead.status, 200, 'one step ahead: accepted');
  aal2 = ahead.body;
  const older = await challengeAndVerify(aal2.access_token, f2, codeAt(totp2, 0));
  t.equal(older.status, 400, 'a step before the last accepted one is refused');
});

t.test('verify attempts are limited per factor', async (t) => {
  const e = await enroll(aal2.access_token, 'limited');
  const f3 = e.body.id as string;
  const totp3 = totpOf(e.body.totp.secret);
  const right = codeAt(totp3, 0);
  const wrong = String((Number(right) + 500_000) % 1_000_000).padStart(6, '0');
  for (let i = 0; i < 5; i++) t.equal((await challengeAndVerify(aal2.access_token, f3, wrong)).status, 400, `wrong code ${i + 1}`);
  const limited = await challengeAndVerify(aal2.access_token, f3, right);
  t.same([limited.status, limited.body], [429, { error: 'too many requests, try again later' }], 'even the right code, once over the limit');
});

t.test('unenrol: a verified factor needs aal2, an unverified one does not', async (t) => {
  const s = await signIn(app, email);
  const low = s.body.access_token as string;
  t.equal(jwtPayload(low).aal, 'aal1', 'a password sign-in of an MFA user is aal1');
  const refused = await app.call('DELETE', `/auth/v1/factors/${factorId}`, { token: low });
  t.same([refused.status, refused.body], [403, { error: 'this needs a session verified with a second factor (aal2)' }]);
  const enrolLow = await enroll(low, 'not with aal1');
  t.equal(enrolLow.status, 403, 'adding a factor next to a verified one needs aal2 too');
  const ok = await app.call('DELETE', `/auth/v1/factors/${factorId}`, { token: aal2.access_token, headers: { 'user-agent': UA } });
  t.same([ok.status, ok.body], [200, { id: factorId }]);
  const gone = await app.call('DELETE', `/auth/v1/factors/${factorId}`, { token: aal2.access_token });
  t.same([gone.status, gone.body], [404, { error: 'factor not found' }]);
  // An unverified factor of another user goes with aal1.
  const other = await signUp(app, uniqueEmail('mfa-other'));
  const e = await enroll(other.session.access_token);
  t.equal((await app.call('DELETE', `/auth/v1/factors/${e.body.id}`, { token: other.session.access_token })).status, 200);
  t.equal((await app.call('POST', `/auth/v1/factors/${factorId}/challenge`, { token: other.session.access_token })).status, 404, "another user's factor is not found");
});

t.test('admin: list and delete a user factors', async (t) => {
  const userId = aal1.user.id;
  t.equal((await app.call('GET', `/auth/v1/admin/users/${userId}/factors`, { token: aal1.access_token })).status, 403);
  const list = await app.call('GET', `/auth/v1/admin/users/${userId}/factors`, { token: app.serviceKey });
  t.equal(list.status, 200);
  t.same(list.body.map((f: { friendly_name: string }) => f.friendly_name).sort(), ['limited', 'second']);
  const id = list.body[0].id;
  const del = await app.call('DELETE', `/auth/v1/admin/users/${userId}/factors/${id}`, { token: app.serviceKey });
  t.same([del.status, del.body], [200, { id }]);
  t.equal((await app.call('DELETE', `/auth/v1/admin/users/${userId}/factors/${id}`, { token: app.serviceKey })).status, 404);
  t.same((await app.call('GET', `/auth/v1/admin/users/00000000-0000-4000-8000-000000000000/factors`, { token: app.serviceKey })).body, {
    error: 'user not found',
  });
  t.equal((await app.call('GET', `/auth/v1/admin/users/nope/factors`, { token: app.serviceKey })).status, 400);
});

t.test('audit log: who did what, from where, and never a secret', async (t) => {
  t.equal((await signIn(app, email, 'wrong password!')).status, 401);
  const userId = aal1.user.id;
  const all = await app.call('GET', `/auth/v1/admin/audit?user_id=${userId}&per_page=1000`, { token: app.serviceKey });
  t.equal(all.status, 200, 'answered 200', { body: all.text });
  const actions = new Set((all.body as { action: string }[]).map((e) => e.action));
  for (const a of ['sign_up', 'sign_in', 'sign_in_failed', 'mfa_enrolled', 'mfa_verified', 'mfa_verify_failed', 'mfa_unenrolled', 'refresh_reuse_detected', 'admin_factor_deleted']) {
    t.ok(actions.has(a), `${a} is recorded`);
  }
  const verified = (all.body as Record<string, any>[]).find((e) => e.action === 'mfa_verified')!;
  t.match(verified, { ip: '127.0.0.1', user_agent: UA, request_id: String, created_at: String, detail: { factor_id: String } });
  const signInEntry = (all.body as Record<string, any>[]).find((e) => e.action === 'sign_in')!;
  t.equal(signInEntry.detail.method, 'password', 'sign-ins carry their method');
  t.notOk(all.text.includes(PASSWORD), 'no password in the log');
  t.notOk(all.text.includes(aal2.refresh_token) || all.text.includes(aal2.access_token), 'no token in the log');
  const ids = (all.body as { id: number }[]).map((e) => e.id);
  t.same(ids, [...ids].sort((a, b) => b - a), 'newest first');

  const page1 = await app.call('GET', `/auth/v1/admin/audit?user_id=${userId}&per_page=2`, { token: app.serviceKey });
  const page2 = await app.call('GET', `/auth/v1/admin/audit?user_id=${userId}&per_page=2&page=2`, { token: app.serviceKey });
  t.same(page1.body.map((e: { id: number }) => e.id), ids.slice(0, 2));
  t.same(page2.body.map((e: { id: number }) => e.id), ids.slice(2, 4));
  const failed = await app.call('GET', `/auth/v1/admin/audit?action=sign_in_failed&user_id=${userId}`, { token: app.serviceKey });
  t.ok(failed.body.length >= 1 && failed.body.every((e: { action: string }) => e.action === 'sign_in_failed'), 'filter by action');
  const future = await app.call('GET', `/auth/v1/admin/audit?since=2999-01-01T00:00:00Z`, { token: app.serviceKey });
  t.same(future.body, [], 'filter by time');
  for (const bad of ['user_id=nope', 'per_page=0', 'per_page=5000', 'page=x', 'since=yesterday', 'action=DROP%20TABLE']) {
    const r = await app.call('GET', `/auth/v1/admin/audit?${bad}`, { token: app.serviceKey });
    t.same([r.status, r.body], [400, { error: 'invalid audit query' }], bad);
  }
  t.equal((await app.call('GET', '/auth/v1/admin/audit', { token: aal2.access_token })).status, 403, 'service role only');
});

t.test('MFA_ENCRYPTION_KEY, when set, is the key the secrets are encrypted under', async (t) => {
  const mfaKeyText = 'a separate key for the second factors, 32+ chars';
  const other = await startAuthApp(t, { db, env: { MFA_ENCRYPTION_KEY: mfaKeyText } });
  const s = await signUp(other, uniqueEmail('mfa-key'));
  const e = await other.call('POST', '/auth/v1/factors', { token: s.session.access_token, body: { factor_type: 'totp' } });
  t.equal(e.status, 200, 'answered 200', { body: e.text });
  // The documented derivation: HKDF-SHA256 of the key, salt "plinth", info "plinth auth mfa secret v1", 32 bytes.
  const derive = (k: string) => Buffer.from(hkdfSync('sha256', k, 'plinth', 'plinth auth mfa secret v1', 32));
  const open = async (key: Buffer) => {
    try {
      const [r] = await db.sql<{ b32: string }[]>`select auth_private.base32(auth_private.mfa_unseal(secret, ${key})) as b32 from auth_private.mfa_factors where id = ${e.body.id}`;
      return r.b32;
    } catch {
      return null;
    }
  };
  t.equal(await open(derive(mfaKeyText)), e.body.totp.secret, 'opens with the key from MFA_ENCRYPTION_KEY');
  t.not(await open(derive(app.config.secret)), e.body.totp.secret, 'not with the one from JWT_SECRET');
  const code = totpOf(e.body.totp.secret).generate();
  const c = await other.call('POST', `/auth/v1/factors/${e.body.id}/challenge`, { token: s.session.access_token });
  const v = await other.call('POST', `/auth/v1/factors/${e.body.id}/verify`, { token: s.session.access_token, body: { challenge_id: c.body.id, code } });
  t.equal(v.status, 200, 'and the service verifies with it');
});
