/**
 * POST /auth/v1/token (both grants) and the refresh-token state table (interface §3.1):
 * rotation, reuse detection revoking the family, expiry, logout, admin delete; that
 * refresh answers a full Session keeping session_id; the §7.1 messages of sign-in; and
 * that a user token without exp is refused.
 */
import t from 'tap';
import { SignJWT } from 'jose';
import { TEST_JWT_SECRET } from '../helpers/app.ts';
import { PASSWORD, jwtPayload, refresh, signIn, signUp, sleep, startAuthApp, uniqueEmail } from './helpers.ts';

const REUSE = 'refresh token reuse detected — please log in again';

t.test('token endpoint', async (t) => {
  const app = await startAuthApp(t, { worker: false });

  t.test('password grant: 200 Session for the right password, new family each time', async (t) => {
    const { email, session: first } = await signUp(app);
    const r = await signIn(app, email);
    t.equal(r.status, 200);
    t.equal(r.headers.get('cache-control'), 'no-store');
    t.equal(r.body.token_type, 'bearer');
    t.same(r.body.user, first.user);
    t.not(jwtPayload(r.body.access_token).session_id, jwtPayload(first.access_token).session_id, 'each sign-in starts a family');
    t.not(r.body.refresh_token, first.refresh_token);
    // The family id in the token is the one in the database: rotation keeps it, logout ends it.
    const rotated = await refresh(app, r.body.refresh_token);
    t.equal(jwtPayload(rotated.body.access_token).session_id, jwtPayload(r.body.access_token).session_id);
    t.equal((await app.call('POST', '/auth/v1/logout', { token: r.body.access_token })).status, 204);
    t.same((await refresh(app, rotated.body.refresh_token)).body, { error: 'invalid refresh token' }, 'logout ended that family');
    t.equal((await refresh(app, first.refresh_token)).status, 200, 'and only that one');
  });

  t.test('password grant: wrong password and unknown email → 401 invalid email or password', async (t) => {
    const { email } = await signUp(app);
    for (const [e, p] of [
      [email, 'wrong password'],
      [uniqueEmail('nobody'), PASSWORD],
      ['not an email', PASSWORD],
    ]) {
      const r = await signIn(app, e, p);
      t.equal(r.status, 401, `${e} / ${p}`);
      t.same(r.body, { error: 'invalid email or password' });
    }
  });

  t.test('grant_type must be in the JSON body; a query parameter is ignored', async (t) => {
    const { email } = await signUp(app);
    const onlyQuery = await app.call('POST', '/auth/v1/token?grant_type=password', { body: { email, password: PASSWORD } });
    t.equal(onlyQuery.status, 400);
    t.same(onlyQuery.body, { error: 'invalid request body' });
    const conflicting = await app.call('POST', '/auth/v1/token?grant_type=refresh_token', {
      body: { grant_type: 'password', email, password: PASSWORD },
    });
    t.equal(conflicting.status, 200, 'the body decides');
  });

  t.test('malformed token requests → 400 invalid request body', async (t) => {
    for (const body of [
      {},
      { grant_type: 'client_credentials' },
      { grant_type: 'password', email: 'a@example.com' },
      { grant_type: 'password', password: PASSWORD },
      { grant_type: 'password', email: 1, password: PASSWORD },
      { grant_type: 'refresh_token' },
      { grant_type: 'refresh_token', refresh_token: 42 },
    ]) {
      const r = await app.call('POST', '/auth/v1/token', { body });
      t.equal(r.status, 400, JSON.stringify(body));
      t.same(r.body, { error: 'invalid request body' });
    }
    const form = await app.call('POST', '/auth/v1/token', {
      raw: 'grant_type=password&email=a@example.com&password=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    t.equal(form.status, 400);
    t.same(form.body, { error: 'invalid request body' });
  });

  t.test('§3.1 valid → rotated: a full Session, same session_id, new refresh token', async (t) => {
    const { session } = await signUp(app);
    const r = await refresh(app, session.refresh_token);
    t.equal(r.status, 200);
    t.same(Object.keys(r.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type', 'user']);
    t.same(r.body.user, session.user);
    t.not(r.body.refresh_token, session.refresh_token);
    const before = jwtPayload(session.access_token);
    const after = jwtPayload(r.body.access_token);
    t.equal(after.session_id, before.session_id, 'rotation keeps session_id');
    t.equal(after.sub, before.sub);
    t.equal(after.role, 'authenticated');
    t.equal(after.is_anonymous, false);
    const me = await app.call('GET', '/auth/v1/user', { token: r.body.access_token });
    t.equal(me.status, 200, 'the new access token works');
    const again = await refresh(app, r.body.refresh_token);
    t.equal(again.status, 200, 'the new refresh token rotates in turn');
  });

  t.test('§3.1 revoked (rotated) → replay revokes the whole family', async (t) => {
    const { session } = await signUp(app);
    const second = await refresh(app, session.refresh_token);
    t.equal(second.status, 200);
    const replay = await refresh(app, session.refresh_token);
    t.equal(replay.status, 401);
    t.same(replay.body, { error: REUSE });
    const successor = await refresh(app, second.body.refresh_token);
    t.equal(successor.status, 401, 'the live token of the family is revoked too');
    t.same(successor.body, { error: 'invalid refresh token' }, 'a token of a revoked family is invalid, not reuse');
    const replayAgain = await refresh(app, session.refresh_token);
    t.same(replayAgain.body, { error: 'invalid refresh token' }, 'the family stays revoked (the status persisted)');
    const [row] = await app.db.sql`select revoked_reason from auth_private.sessions where id = ${jwtPayload(session.access_token).session_id as string}`;
    t.equal(row.revoked_reason, 'reuse_detected');
  });

  t.test('reuse in one family leaves the user\'s other families alone', async (t) => {
    const { email, session: a } = await signUp(app);
    const b = (await signIn(app, email)).body;
    await refresh(app, a.refresh_token);
    t.same((await refresh(app, a.refresh_token)).body, { error: REUSE });
    t.equal((await refresh(app, b.refresh_token)).status, 200);
  });

  t.test('§3.1 unknown refresh token → 401 invalid refresh token', async (t) => {
    for (const token of ['nope', 'A'.repeat(43), '']) {
      const r = await refresh(app, token);
      t.equal(r.status, 401);
      t.same(r.body, { error: 'invalid refresh token' });
    }
  });

  t.test('§3.1 valid → invalidated by logout; access token stays valid', async (t) => {
    const { session } = await signUp(app);
    const out = await app.call('POST', '/auth/v1/logout', { token: session.access_token, body: {} });
    t.equal(out.status, 204);
    t.equal(out.text, '');
    const r = await refresh(app, session.refresh_token);
    t.equal(r.status, 401);
    t.same(r.body, { error: 'invalid refresh token' });
    const me = await app.call('GET', '/auth/v1/user', { token: session.access_token });
    t.equal(me.status, 200, 'the access token is valid until it expires');
  });

  t.test('logout ends only the caller\'s family; no body, twice, and without a token', async (t) => {
    const { email, session: a } = await signUp(app);
    const b = (await signIn(app, email)).body;
    const out = await app.call('POST', '/auth/v1/logout', { token: a.access_token });
    t.equal(out.status, 204, 'absent body accepted');
    t.equal((await refresh(app, b.refresh_token)).status, 200, 'the other family lives');
    t.equal((await app.call('POST', '/auth/v1/logout', { token: a.access_token })).status, 204, 'logging out twice is fine');
    const anon = await app.call('POST', '/auth/v1/logout', {});
    t.equal(anon.status, 401);
    t.same(anon.body, { error: 'invalid or expired token' });
    const key = await app.call('POST', '/auth/v1/logout', { token: app.anonKey });
    t.equal(key.status, 401, 'the anon key has no sub');
    t.same(key.body, { error: 'invalid or expired token' });
    const bad = await app.call('POST', '/auth/v1/logout', { token: 'x.y.z' });
    t.same(bad.body, { error: 'invalid or expired token' });
  });

  t.test('admin delete: refresh tokens of the user become invalid, access token lives on', async (t) => {
    const { session } = await signUp(app);
    const del = await app.call('DELETE', `/auth/v1/admin/users/${session.user.id}`, { token: app.serviceKey });
    t.equal(del.status, 204);
    const r = await refresh(app, session.refresh_token);
    t.equal(r.status, 401);
    t.same(r.body, { error: 'invalid refresh token' });
  });

  t.test('sign-in of a deleted user fails like an unknown one', async (t) => {
    const { email, session } = await signUp(app);
    await app.call('DELETE', `/auth/v1/admin/users/${session.user.id}`, { token: app.serviceKey });
    const r = await signIn(app, email);
    t.equal(r.status, 401);
    t.same(r.body, { error: 'invalid email or password' });
  });

  t.test('refresh tokens are stored only as SHA-256', async (t) => {
    const { session } = await signUp(app);
    const hex = (await import('node:crypto')).createHash('sha256').update(session.refresh_token).digest();
    const rows = await app.db.sql`select token_hash from auth_private.refresh_tokens where token_hash = ${hex}`;
    t.equal(rows.length, 1);
    const clear = await app.db.sql`select 1 from auth_private.refresh_tokens where position(convert_to(${session.refresh_token}, 'UTF8') in token_hash) > 0`;
    t.equal(clear.length, 0, 'no row holds the token itself');
  });
});

t.test('§3.1 valid → expired: 401 refresh token expired, and it stays expired', async (t) => {
  const app = await startAuthApp(t, { worker: false, env: { REFRESH_TOKEN_TTL: '1' } });
  const { session } = await signUp(app);
  // Until the database's clock (the one that judges) has passed the token's expiry.
  const hash = (await import('node:crypto')).createHash('sha256').update(session.refresh_token).digest();
  const expired = async () => (await app.db.sql`select expires_at < now() as past from auth_private.refresh_tokens where token_hash = ${hash}`)[0]?.past === true;
  for (const end = Date.now() + 30_000; !(await expired()) && Date.now() < end; ) await sleep(50);
  t.ok(await expired(), 'the refresh token is past its expiry');
  const r = await refresh(app, session.refresh_token);
  t.equal(r.status, 401);
  t.same(r.body, { error: 'refresh token expired' });
  const again = await refresh(app, session.refresh_token);
  t.same(again.body, { error: 'refresh token expired' });
});

t.test('ACCESS_TOKEN_TTL: an expired access token gives 401 invalid or expired token', async (t) => {
  const app = await startAuthApp(t, { worker: false, env: { ACCESS_TOKEN_TTL: '1' } });
  const { session } = await signUp(app);
  t.equal(session.expires_in, 1);
  // Until this process's clock (the one that verifies) reaches the token's exp.
  const exp = jwtPayload(session.access_token).exp as number;
  while (Math.floor(Date.now() / 1000) < exp) await sleep(50);
  const me = await app.call('GET', '/auth/v1/user', { token: session.access_token });
  t.equal(me.status, 401);
  t.same(me.body, { error: 'invalid or expired token' });
  const r = await refresh(app, session.refresh_token);
  t.equal(r.status, 200, 'the refresh token still works');
  // The new access token lives 1 s too, so using it would race the clock on a loaded
  // machine: check what it says instead.
  const claims = jwtPayload(r.body.access_token);
  t.equal((claims.exp as number) - (claims.iat as number), 1, 'a fresh access token with the same lifetime');
  t.not(r.body.access_token, session.access_token);
});

t.test('concurrent refreshes of one token over HTTP: exactly one succeeds', async (t) => {
  const app = await startAuthApp(t, { worker: false, env: { DB_POOL_SIZE: '4' } });
  const { session } = await signUp(app);
  const results = await Promise.all(Array.from({ length: 4 }, () => refresh(app, session.refresh_token)));
  t.equal(results.filter((r) => r.status === 200).length, 1, 'one winner');
  for (const r of results.filter((x) => x.status !== 200)) {
    t.equal(r.status, 401);
    t.ok(r.body.error === REUSE || r.body.error === 'invalid refresh token', r.body.error);
  }
});

t.test('a user token without exp is refused: 401 invalid or expired token', async (t) => {
  const app = await startAuthApp(t, { worker: false });
  const { session } = await signUp(app);
  const claims = jwtPayload(session.access_token);
  const key = new TextEncoder().encode(TEST_JWT_SECRET);
  // The claims of a real access token, signed with the real secret, without exp.
  const { exp: _exp, ...forever } = claims;
  const noExp = await new SignJWT(forever).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(key);
  const withExp = await new SignJWT(forever)
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setExpirationTime(Math.floor(Date.now() / 1000) + 600)
    .sign(key);
  t.equal((await app.call('GET', '/auth/v1/user', { token: withExp })).status, 200, 'the same claims with exp are accepted');
  for (const [path, method] of [['/auth/v1/user', 'GET'], ['/auth/v1/user', 'PATCH'], ['/rest/v1/rls-debug', 'GET']] as const) {
    const r = await app.call(method, path, { token: noExp, ...(method === 'PATCH' ? { body: { data: { x: 1 } } } : {}) });
    t.equal(r.status, 401, `${method} ${path}`);
    t.same(r.body, { error: 'invalid or expired token' }, `${method} ${path}`);
  }
  // The anon and service-role keys carry exp (derived keys: ten years); a key given in
  // ANON_KEY without exp is the operator's choice and still verifies: the rule is for tokens with sub.
  t.ok(typeof jwtPayload(app.anonKey).exp === 'number' && typeof jwtPayload(app.serviceKey).exp === 'number', 'the derived keys carry exp');
  const roleOnly = await new SignJWT({ role: 'anon' }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(key);
  t.equal((await app.call('GET', '/rest/v1/rls-debug', { token: roleOnly })).status, 200, 'a role-only key without exp still verifies');
});
