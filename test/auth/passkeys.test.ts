/**
 * Passkeys over real HTTP with a software authenticator (passkey-authenticator.ts): register,
 * list, sign in (aal1, amr passkey), and every refusal: a replayed or expired challenge, a
 * wrong origin, another user's credential or passkey, a counter that does not grow, a banned
 * user, garbage, guests; delete; the settings; GoTrue's session under SUPABASE_COMPAT.
 * The browser's own ceremony is test/client/browser-passkeys.test.ts.
 */
import t from 'tap';
import { parseConfig } from '../../src/core/config.ts';
import type { TestApp } from '../helpers/app.ts';
import { jwtPayload, PASSWORD, refresh, startAuthApp, uniqueEmail } from './helpers.ts';
import { create, get, type SoftCredential } from './passkey-authenticator.ts';

const SITE = 'http://localhost:5173';
const app = await startAuthApp(t, { env: { SITE_URL: SITE, AUTH_RATE_LIMIT: '0', ALLOW_ANONYMOUS_SIGNIN: 'true' } });

async function user(a: TestApp): Promise<{ id: string; token: string }> {
  const r = await a.call('POST', '/auth/v1/signup', { body: { email: uniqueEmail('passkey'), password: PASSWORD } });
  if (r.status !== 200 && r.status !== 201) throw new Error(`signup: ${r.status} ${r.text}`);
  return { id: r.body.user.id, token: r.body.access_token };
}

async function registrationOptions(a: TestApp, token: string) {
  const r = await a.call('POST', '/auth/v1/passkeys/registration/options', { token, body: {} });
  if (r.status !== 200) throw new Error(`registration options: ${r.status} ${r.text}`);
  return r.body;
}

async function register(a: TestApp, token: string, origin = SITE, reuse?: SoftCredential) {
  const o = await registrationOptions(a, token);
  const { credential, response } = create(o.options, origin, reuse);
  const r = await a.call('POST', '/auth/v1/passkeys/registration/verify', { token, body: { challenge_id: o.challenge_id, credential: response } });
  return { credential, r };
}

async function authOptions(a: TestApp) {
  const r = await a.call('POST', '/auth/v1/passkeys/authentication/options', { body: {} });
  if (r.status !== 200) throw new Error(`authentication options: ${r.status} ${r.text}`);
  return r.body;
}

async function signInWith(a: TestApp, credential: SoftCredential, opts: Parameters<typeof get>[3] & { origin?: string } = {}) {
  const o = await authOptions(a);
  const body = { challenge_id: o.challenge_id, credential: get(o.options, opts.origin ?? SITE, credential, opts) };
  return { body, r: await a.call('POST', '/auth/v1/passkeys/authentication/verify', { body }) };
}

const alice = await user(app);
const bob = await user(app);
let aliceKey: SoftCredential;
let alicePasskeyId: string;

await t.test('registration: options in WebAuthn JSON, then a stored passkey', async (t) => {
  const o = await registrationOptions(app, alice.token);
  t.match(o.challenge_id, /^[0-9a-f-]{36}$/);
  t.ok(Math.abs(o.expires_at - (Date.now() / 1000 + 300)) < 30, 'expires in 5 minutes (seconds since the epoch)');
  t.equal(o.options.rp.id, 'localhost', 'the RP id is SITE_URL\'s host');
  t.equal(Buffer.from(o.options.user.id, 'base64url').toString(), alice.id, 'the user handle is the user id');
  t.equal(o.options.user.name, (await app.call('GET', '/auth/v1/user', { token: alice.token })).body.email);
  t.equal(o.options.authenticatorSelection.residentKey, 'required', 'a discoverable credential');
  t.equal(Buffer.from(o.options.challenge, 'base64url').length, 32);
  const { credential, response } = create(o.options, SITE);
  const r = await app.call('POST', '/auth/v1/passkeys/registration/verify', {
    token: alice.token,
    body: { challenge_id: o.challenge_id, credential: response, friendly_name: 'laptop' },
  });
  t.equal(r.status, 200, r.text);
  t.match(r.body, { id: /^[0-9a-f-]{36}$/, friendly_name: 'laptop', created_at: String });
  aliceKey = credential;
  alicePasskeyId = r.body.id;
  const list = await app.call('GET', '/auth/v1/passkeys', { token: alice.token });
  t.same(list.body.map((p: { id: string }) => p.id), [alicePasskeyId], 'listed');
  const stored = await app.db.sql`select sign_count, transports from auth.passkeys where id = ${alicePasskeyId}`;
  t.same([Number(stored[0].sign_count), stored[0].transports], [0, ['internal']]);
});

await t.test('sign-in: a session at aal1 with amr passkey, whose refresh token works', async (t) => {
  const { r } = await signInWith(app, aliceKey, { counter: 1 });
  t.equal(r.status, 200, r.text);
  t.equal(r.headers.get('cache-control'), 'no-store');
  t.equal(r.body.user.id, alice.id);
  const claims = jwtPayload(r.body.access_token);
  t.equal(claims.sub, alice.id);
  t.equal(claims.aal, 'aal1');
  t.same((claims.amr as { method: string }[]).map((m) => m.method), ['passkey']);
  t.notOk('expires_at' in r.body, 'plinth\'s Session shape');
  t.equal((await refresh(app, r.body.refresh_token)).status, 200);
  const list = await app.call('GET', '/auth/v1/passkeys', { token: alice.token });
  t.match(list.body[0].last_used_at, /Z$/, 'last_used_at set');
  const options = await authOptions(app);
  t.equal(options.options.rpId, 'localhost');
  t.same(options.options.allowCredentials ?? [], [], 'no credential list: the options tell nothing of any account');
});

await t.test('a replayed challenge is refused', async (t) => {
  const { body, r } = await signInWith(app, aliceKey, { counter: 2 });
  t.equal(r.status, 200);
  const again = await app.call('POST', '/auth/v1/passkeys/authentication/verify', { body });
  t.same([again.status, again.body], [400, { error: 'passkey challenge not found or already used' }]);
});

await t.test('an expired challenge is refused', async (t) => {
  const o = await authOptions(app);
  await app.db.sql`update auth_private.passkey_challenges set expires_at = now() - interval '1 second' where id = ${o.challenge_id}`;
  const r = await app.call('POST', '/auth/v1/passkeys/authentication/verify', { body: { challenge_id: o.challenge_id, credential: get(o.options, SITE, aliceKey, { counter: 3 }) } });
  t.same([r.status, r.body], [400, { error: 'passkey challenge expired' }]);
  const ro = await registrationOptions(app, alice.token);
  await app.db.sql`update auth_private.passkey_challenges set expires_at = now() - interval '1 second' where id = ${ro.challenge_id}`;
  const rr = await app.call('POST', '/auth/v1/passkeys/registration/verify', {
    token: alice.token,
    body: { challenge_id: ro.challenge_id, credential: create(ro.options, SITE).response },
  });
  t.same([rr.status, rr.body], [400, { error: 'passkey challenge expired' }]);
});

await t.test('a wrong origin is refused, for sign-in and registration, and nothing is kept', async (t) => {
  const { r } = await signInWith(app, aliceKey, { counter: 4, origin: 'https://evil.example' });
  t.same([r.status, r.body], [400, { error: 'passkey verification failed' }]);
  const { r: rr } = await register(app, bob.token, 'http://localhost:5174');
  t.same([rr.status, rr.body], [400, { error: 'passkey verification failed' }]);
  t.same((await app.call('GET', '/auth/v1/passkeys', { token: bob.token })).body, []);
});

await t.test('another user\'s credential or passkey', async (t) => {
  const { r } = await register(app, bob.token, SITE, aliceKey);
  t.same([r.status, r.body], [409, { error: 'passkey already registered' }], 'a credential registered by one user cannot be registered by another');
  const handle = Buffer.from(bob.id).toString('base64url');
  const { r: asBob } = await signInWith(app, aliceKey, { counter: 5, userHandle: handle });
  t.same([asBob.status, asBob.body], [400, { error: 'passkey verification failed' }], 'a user handle that is not the passkey\'s user');
  const o = await registrationOptions(app, alice.token);
  const stolen = await app.call('POST', '/auth/v1/passkeys/registration/verify', {
    token: bob.token,
    body: { challenge_id: o.challenge_id, credential: create(o.options, SITE).response },
  });
  t.same([stolen.status, stolen.body], [400, { error: 'passkey challenge not found or already used' }], 'a registration challenge is its user\'s');
  for (const [method, body] of [['PATCH', { friendly_name: 'mine' }], ['DELETE', undefined]] as const) {
    const d = await app.call(method, `/auth/v1/passkeys/${alicePasskeyId}`, { token: bob.token, body });
    t.same([d.status, d.body], [404, { error: 'passkey not found' }], `${method} of another user's passkey`);
  }
  t.equal((await app.call('GET', '/auth/v1/passkeys', { token: alice.token })).body.length, 1, 'still there');
});

await t.test('a signature counter that does not grow is refused (a cloned authenticator)', async (t) => {
  const { r } = await signInWith(app, aliceKey, { counter: 10 });
  t.equal(r.status, 200, r.text);
  const { r: again } = await signInWith(app, aliceKey, { counter: 10 });
  t.same([again.status, again.body], [400, { error: 'passkey verification failed' }]);
});

await t.test('a banned user cannot sign in with a passkey', async (t) => {
  await app.db.sql`update auth.users set banned_until = now() + interval '1 hour' where id = ${alice.id}`;
  const { r } = await signInWith(app, aliceKey, { counter: 20 });
  t.same([r.status, r.body], [403, { error: 'user is banned' }]);
  await app.db.sql`update auth.users set banned_until = null where id = ${alice.id}`;
  t.equal((await signInWith(app, aliceKey, { counter: 21 })).r.status, 200, 'the ban lifted, the passkey works again');
});

await t.test('bad input: 400 or 401, never a 500', async (t) => {
  const o = await authOptions(app);
  const cases: [unknown, number, string][] = [
    [{ challenge_id: o.challenge_id, credential: {} }, 400, 'passkey verification failed'],
    [{ challenge_id: 'nope', credential: {} }, 400, 'passkey challenge not found or already used'],
    [{ challenge_id: o.challenge_id }, 400, 'invalid request body'],
    [{ challenge_id: o.challenge_id, credential: 'x' }, 400, 'invalid request body'],
  ];
  for (const [body, status, error] of cases) {
    const r = await app.call('POST', '/auth/v1/passkeys/authentication/verify', { body });
    t.same([r.status, r.body], [status, { error }], JSON.stringify(body));
  }
  // Hostile shapes inside `credential` (each with a fresh challenge): all 400, none a 500.
  const hostile: unknown[] = [
    { id: 5, response: {} },
    { id: 'AAAA', response: { clientDataJSON: 123, authenticatorData: [], signature: null, userHandle: {} } },
    { id: aliceKey.id.toString('base64url'), rawId: 7, type: 'public-key', response: 'x' },
    { id: aliceKey.id.toString('base64url'), response: { clientDataJSON: 'e30', authenticatorData: '', signature: '', userHandle: Buffer.from(alice.id).toString('base64url') } },
    { id: 'x'.repeat(5000), response: {} },
  ];
  for (const credential of hostile) {
    const h = await authOptions(app);
    const r = await app.call('POST', '/auth/v1/passkeys/authentication/verify', { body: { challenge_id: h.challenge_id, credential } });
    t.same([r.status, r.body], [400, { error: 'passkey verification failed' }], `sign-in with ${JSON.stringify(credential).slice(0, 80)}`);
    const ho = await registrationOptions(app, bob.token);
    const rr = await app.call('POST', '/auth/v1/passkeys/registration/verify', { token: bob.token, body: { challenge_id: ho.challenge_id, credential } });
    t.same([rr.status, rr.body], [400, { error: 'passkey verification failed' }], `registration with ${JSON.stringify(credential).slice(0, 80)}`);
  }
  const o2 = await authOptions(app);
  const signed = get(o2.options, SITE, aliceKey, { counter: 30 }) as { response: Record<string, string> };
  signed.response.signature = Buffer.from('not a signature').toString('base64url');
  const forged = await app.call('POST', '/auth/v1/passkeys/authentication/verify', { body: { challenge_id: o2.challenge_id, credential: signed } });
  t.same([forged.status, forged.body], [400, { error: 'passkey verification failed' }], 'a bad signature');
  const ro = await registrationOptions(app, bob.token);
  const garbage = create(ro.options, SITE).response as { response: Record<string, string> };
  garbage.response.attestationObject = Buffer.from('garbage').toString('base64url');
  const g = await app.call('POST', '/auth/v1/passkeys/registration/verify', { token: bob.token, body: { challenge_id: ro.challenge_id, credential: garbage } });
  t.same([g.status, g.body], [400, { error: 'passkey verification failed' }], 'a bad attestation');
  for (const [method, path] of [['POST', '/auth/v1/passkeys/registration/options'], ['GET', '/auth/v1/passkeys'], ['DELETE', `/auth/v1/passkeys/${alicePasskeyId}`]]) {
    const r = await app.call(method, path, { body: method === 'POST' ? {} : undefined });
    t.same([r.status, r.body], [401, { error: 'invalid or expired token' }], `${method} ${path} without a token`);
  }
  const guest = await app.call('POST', '/auth/v1/anonymous', { body: {} });
  const gr = await app.call('POST', '/auth/v1/passkeys/registration/options', { token: guest.body.access_token, body: {} });
  t.same([gr.status, gr.body], [403, { error: 'guests cannot register passkeys' }]);
  const long = await app.call('PATCH', `/auth/v1/passkeys/${alicePasskeyId}`, { token: alice.token, body: { friendly_name: 'x'.repeat(121) } });
  t.same([long.status, long.body], [400, { error: 'friendly_name must be 1 to 120 characters' }]);
});

await t.test('rename and delete; a deleted passkey signs no one in', async (t) => {
  const p = await app.call('PATCH', `/auth/v1/passkeys/${alicePasskeyId}`, { token: alice.token, body: { friendly_name: 'phone' } });
  t.same([p.status, p.body.friendly_name], [200, 'phone']);
  const d = await app.call('DELETE', `/auth/v1/passkeys/${alicePasskeyId}`, { token: alice.token });
  t.equal(d.status, 204);
  t.same((await app.call('GET', '/auth/v1/passkeys', { token: alice.token })).body, []);
  const again = await app.call('DELETE', `/auth/v1/passkeys/${alicePasskeyId}`, { token: alice.token });
  t.same([again.status, again.body], [404, { error: 'passkey not found' }]);
  const { r } = await signInWith(app, aliceKey, { counter: 40 });
  t.same([r.status, r.body], [400, { error: 'passkey verification failed' }]);
  const actions = await app.db.sql`select action from auth.audit_log_entries where user_id = ${alice.id} and action like 'passkey%' order by id`;
  t.same(actions.map((a) => a.action), ['passkey_created', 'passkey_counter_rejected', 'passkey_updated', 'passkey_deleted']);
});

await t.test('the service role lists and deletes a user\'s passkeys', async (t) => {
  const svc = { token: app.serviceKey };
  const { r } = await register(app, bob.token);
  t.equal(r.status, 200, r.text);
  const list = await app.call('GET', `/auth/v1/admin/users/${bob.id}/passkeys`, svc);
  t.same(list.body.map((p: { id: string }) => p.id), [r.body.id]);
  const asUser = await app.call('GET', `/auth/v1/admin/users/${bob.id}/passkeys`, { token: bob.token });
  t.equal(asUser.status, 403, 'a user token is refused');
  const unknown = await app.call('GET', '/auth/v1/admin/users/00000000-0000-4000-8000-0000000000ff/passkeys', svc);
  t.same([unknown.status, unknown.body], [404, { error: 'user not found' }]);
  const wrongUser = await app.call('DELETE', `/auth/v1/admin/users/${alice.id}/passkeys/${r.body.id}`, svc);
  t.same([wrongUser.status, wrongUser.body], [404, { error: 'passkey not found' }], 'the passkey of another user');
  t.equal((await app.call('DELETE', `/auth/v1/admin/users/${bob.id}/passkeys/${r.body.id}`, svc)).status, 204);
  t.same((await app.call('GET', '/auth/v1/passkeys', { token: bob.token })).body, []);
});

await t.test('settings: AUTH_PASSKEY_RP_ID and AUTH_PASSKEY_ORIGINS; GoTrue\'s session under SUPABASE_COMPAT', async (t) => {
  t.throws(() => parseConfig({ AUTH_PASSKEY_RP_ID: 'https://example.com' }), /AUTH_PASSKEY_RP_ID/);
  t.throws(() => parseConfig({ AUTH_PASSKEY_ORIGINS: 'ftp://example.com' }), /AUTH_PASSKEY_ORIGINS/);
  t.same(parseConfig({ AUTH_PASSKEY_ORIGINS: 'https://a.example.com/, https://b.example.com:8443' }).passkeyOrigins, ['https://a.example.com', 'https://b.example.com:8443']);
  const compat = await startAuthApp(t, {
    env: { SUPABASE_COMPAT: 'true', AUTH_RATE_LIMIT: '0', AUTH_PASSKEY_RP_ID: 'example.com', AUTH_PASSKEY_ORIGINS: 'https://app.example.com,https://example.com' },
  });
  const u = await user(compat);
  const o = await registrationOptions(compat, u.token);
  t.equal(o.options.rp.id, 'example.com');
  const { credential, response } = create(o.options, 'https://app.example.com');
  const r = await compat.call('POST', '/auth/v1/passkeys/registration/verify', { token: u.token, body: { challenge_id: o.challenge_id, credential: response } });
  t.equal(r.status, 200, r.text);
  const { r: s } = await signInWith(compat, credential, { counter: 1, origin: 'https://example.com' });
  t.equal(s.status, 200, s.text);
  t.type(s.body.expires_at, 'number', 'GoTrue\'s Session: expires_at');
  t.equal(s.body.user.id, u.id);
  t.ok('app_metadata' in s.body.user, 'and GoTrue\'s User');
  const { r: wrong } = await signInWith(compat, credential, { counter: 2, origin: SITE });
  t.same([wrong.status, wrong.body.error_code], [400, 'webauthn_verification_failed'], 'SITE_URL is no origin once AUTH_PASSKEY_ORIGINS is set; GoTrue\'s error code');
  const { r: taken } = await register(compat, u.token, 'https://app.example.com', credential);
  t.same([taken.status, taken.body.error_code], [422, 'webauthn_credential_exists']);
});
