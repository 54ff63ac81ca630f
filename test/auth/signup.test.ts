/**
 * POST /auth/v1/signup (interface §4.2, §7.1): the Session, the access-token claims of
 * contract §3, input validation, conflicts, and that level-None endpoints ignore
 * Authorization and apikey.
 */
import t from 'tap';
import { jwtVerify } from 'jose';
import { TEST_JWT_SECRET } from '../helpers/app.ts';
import { ISO_UTC, PASSWORD, jwtPayload, signUp, startAuthApp, uniqueEmail } from './helpers.ts';

t.test('signup', async (t) => {
  const app = await startAuthApp(t, { worker: false, env: { ACCESS_TOKEN_TTL: '900' } });

  t.test('answers 201 with a Session whose access token carries the contract claims', async (t) => {
    const email = uniqueEmail('new');
    const before = Math.floor(Date.now() / 1000);
    const r = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD, data: { name: 'Ada', plan: { tier: 1 } } } });
    const after = Math.ceil(Date.now() / 1000);
    t.equal(r.status, 201);
    t.equal(r.headers.get('cache-control'), 'no-store');
    const s = r.body;
    t.same(Object.keys(s).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type', 'user']);
    t.equal(s.token_type, 'bearer');
    t.equal(s.expires_in, 900, 'expires_in follows ACCESS_TOKEN_TTL');
    t.match(s.refresh_token, /^[A-Za-z0-9_-]{43}$/, 'opaque refresh token of 256 bits');
    t.same(Object.keys(s.user).sort(), ['created_at', 'email', 'id', 'role', 'updated_at', 'user_metadata'], 'no provider for email users');
    t.equal(s.user.email, email);
    t.equal(s.user.role, 'authenticated');
    t.same(s.user.user_metadata, { name: 'Ada', plan: { tier: 1 } }, 'data becomes user_metadata');
    t.match(s.user.created_at, ISO_UTC);
    t.match(s.user.updated_at, ISO_UTC);

    const { payload, protectedHeader } = await jwtVerify(s.access_token, new TextEncoder().encode(TEST_JWT_SECRET));
    t.equal(protectedHeader.alg, 'HS256');
    t.equal(payload.sub, s.user.id);
    t.equal(payload.role, 'authenticated');
    t.equal(payload.email, email);
    t.equal(payload.aud, 'authenticated');
    t.equal(payload.is_anonymous, false);
    t.match(payload.session_id, /^[0-9a-f-]{36}$/);
    t.ok(payload.iat! >= before && payload.iat! <= after, 'iat is the time of the sign-up');
    t.equal(payload.exp! - payload.iat!, 900);

    const me = await app.call('GET', '/auth/v1/user', { token: s.access_token });
    t.equal(me.status, 200);
    t.same(me.body, s.user, 'the token works on /auth/v1/user');
  });

  t.test('user_metadata defaults to {}', async (t) => {
    const { session } = await signUp(app);
    t.same(session.user.user_metadata, {});
  });

  t.test('email is unique case-insensitively: 409 email already registered', async (t) => {
    const email = uniqueEmail('Case');
    await signUp(app, email);
    const again = await app.call('POST', '/auth/v1/signup', { body: { email: email.toUpperCase(), password: PASSWORD } });
    t.equal(again.status, 409);
    t.same(again.body, { error: 'email already registered' });
    const [{ n }] = await app.db.sql`select count(*)::int as n from auth.users where lower(email) = lower(${email})`;
    t.equal(n, 1);
  });

  t.test('stores the address lower-cased; sign-in works with any case', async (t) => {
    const email = uniqueEmail('MiXeD').replace('example.com', 'Example.COM');
    const r = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    t.equal(r.status, 201);
    t.equal(r.body.user.email, email.toLowerCase());
    const s = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email: email.toUpperCase(), password: PASSWORD } });
    t.equal(s.status, 200);
  });

  t.test('invalid email address → 400', async (t) => {
    for (const email of ['', 'plain', '@example.com', 'a@', 'a@@example.com', 'a b@example.com', 'a..b@example.com', '.a@example.com', 'a@example', 'a@-example.com', 'a@exa_mple.com', 'a@example.123']) {
      const r = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
      t.equal(r.status, 400, JSON.stringify(email));
      t.same(r.body, { error: 'invalid email address' }, JSON.stringify(email));
    }
  });

  t.test('valid unusual addresses are accepted', async (t) => {
    const tag = Math.random().toString(36).slice(2, 8);
    for (const email of [
      `o'brien.${tag}@example.co.uk`,
      `first+tag-${tag}@sub.example.org`,
      `x/y=z{${tag}}@example.io`,
      `"john doe ${tag}"@example.com`,
      `jörg${tag}@bücher.de`,
      `user${tag}@[192.0.2.1]`,
      `u_${tag}@xn--bcher-kva.example`,
    ]) {
      const r = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
      t.equal(r.status, 201, email);
    }
  });

  t.test('password length 8–256 characters', async (t) => {
    const short = await app.call('POST', '/auth/v1/signup', { body: { email: uniqueEmail(), password: '1234567' } });
    t.equal(short.status, 400);
    t.same(short.body, { error: 'password must be at least 8 characters' });
    const long = await app.call('POST', '/auth/v1/signup', { body: { email: uniqueEmail(), password: 'x'.repeat(257) } });
    t.equal(long.status, 400);
    t.same(long.body, { error: 'password must be at most 256 characters' });
    t.equal((await app.call('POST', '/auth/v1/signup', { body: { email: uniqueEmail(), password: '12345678' } })).status, 201, '8 is enough');
    t.equal((await app.call('POST', '/auth/v1/signup', { body: { email: uniqueEmail(), password: 'y'.repeat(256) } })).status, 201, '256 is allowed');
    const emoji = await app.call('POST', '/auth/v1/signup', { body: { email: uniqueEmail(), password: '🔑🔑🔑🔑🔑🔑🔑' } });
    t.equal(emoji.status, 400, 'characters are code points: 7 emoji are 7 characters');
  });

  t.test('malformed bodies → 400 invalid request body', async (t) => {
    const cases: [string, Parameters<typeof app.call>[2]][] = [
      ['no body', {}],
      ['invalid JSON', { raw: '{"email": ', headers: { 'content-type': 'application/json' } }],
      ['text/plain', { raw: JSON.stringify({ email: uniqueEmail(), password: PASSWORD }), headers: { 'content-type': 'text/plain' } }],
      ['missing password', { body: { email: uniqueEmail() } }],
      ['missing email', { body: { password: PASSWORD } }],
      ['number password', { body: { email: uniqueEmail(), password: 12345678 } }],
      ['array data', { body: { email: uniqueEmail(), password: PASSWORD, data: [1] } }],
      ['string data', { body: { email: uniqueEmail(), password: PASSWORD, data: 'x' } }],
      ['array body', { body: [] }],
    ];
    for (const [name, opts] of cases) {
      const r = await app.call('POST', '/auth/v1/signup', opts);
      t.equal(r.status, 400, name);
      t.same(r.body, { error: 'invalid request body' }, name);
    }
  });

  t.test('ignores Authorization and apikey (level None)', async (t) => {
    const r = await app.call('POST', '/auth/v1/signup', {
      body: { email: uniqueEmail(), password: PASSWORD },
      token: 'not-a-jwt',
      apikey: 'garbage',
    });
    t.equal(r.status, 201);
  });

  t.test('stores an argon2id hash with the OWASP parameters, outside auth.users', async (t) => {
    const { session } = await signUp(app);
    const [row] = await app.db.sql`select hash from auth_private.passwords where user_id = ${session.user.id}`;
    t.match(row.hash, /^\$argon2id\$v=19\$m=19456,p=1,t=2\$/);
    const cols = await app.db.sql`select column_name from information_schema.columns where table_schema = 'auth' and table_name = 'users'`;
    t.notOk(cols.some((c) => /pass|hash/.test(c.column_name as string)), 'no hash column on auth.users');
    t.equal(jwtPayload(session.access_token).sub, session.user.id);
  });
});

t.test('development mode (JWT_SECRET unset): tokens are signed with the generated secret', async (t) => {
  const app = await startAuthApp(t, { worker: false, env: { JWT_SECRET: undefined } });
  t.equal(app.config.devMode, true);
  const r = await app.call('POST', '/auth/v1/signup', { body: { email: uniqueEmail('dev'), password: PASSWORD } });
  t.equal(r.status, 201);
  await t.resolves(jwtVerify(r.body.access_token, new TextEncoder().encode(app.config.secret)), 'verifies with the generated secret');
  await t.rejects(jwtVerify(r.body.access_token, new TextEncoder().encode(TEST_JWT_SECRET)), 'not with another one');
  t.equal((await app.call('GET', '/auth/v1/user', { token: r.body.access_token })).status, 200);
});
