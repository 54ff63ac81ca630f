/**
 * REQUIRE_EMAIL_VERIFICATION (interface §3.2, §5.5) with a real SMTP receiver: signup
 * answers 200 {message} without tokens, sign-in is 403 until the emailed link is opened,
 * GET /auth/v1/verify answers 200 {"message": "email verified"}.
 */
import t from 'tap';
import { PASSWORD, linksOf, signIn, startAuthApp, startSmtp, tokenOfLink, uniqueEmail } from './helpers.ts';

t.test('REQUIRE_EMAIL_VERIFICATION=true', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, {
    env: {
      REQUIRE_EMAIL_VERIFICATION: 'true',
      SMTP_URL: smtp.url,
      MAIL_FROM: 'accounts@plinth.test',
      API_EXTERNAL_URL: 'https://api.plinth.test',
    },
  });

  t.test('§3.2 no account → awaiting confirmation → confirmed', async (t) => {
    const email = uniqueEmail('verify');
    const r = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    t.equal(r.status, 200);
    t.same(Object.keys(r.body), ['message'], 'a message and no tokens');
    t.type(r.body.message, 'string');

    const blocked = await signIn(app, email);
    t.equal(blocked.status, 403, 'awaiting confirmation: password sign-in refused');
    t.same(blocked.body, { error: 'email not verified' });
    const wrong = await signIn(app, email, 'wrong password');
    t.equal(wrong.status, 403, 'condition "any": whatever the password');
    t.same(wrong.body, { error: 'email not verified' });

    const mail = await smtp.next(email);
    t.equal(mail.from, 'accounts@plinth.test', 'MAIL_FROM');
    t.same(mail.to, [email]);
    const links = linksOf(mail.text);
    t.equal(links.length, 1, 'exactly one link');
    t.match(links[0], /^https:\/\/api\.plinth\.test\/auth\/v1\/verify\?token=[A-Za-z0-9_-]+$/);
    const token = tokenOfLink(links[0]);

    const url = new URL(links[0]);
    const v = await app.call('GET', `${url.pathname}${url.search}`);
    t.equal(v.status, 200);
    t.same(v.body, { message: 'email verified' });
    const [row] = await app.db.sql`select email_confirmed_at from auth.users where email = ${email}`;
    t.ok(row.email_confirmed_at, 'confirmed');

    const ok = await signIn(app, email);
    t.equal(ok.status, 200, 'confirmed: sign-in works');
    t.equal(ok.body.user.email, email);

    const again = await app.call('GET', `/auth/v1/verify?token=${token}`);
    t.equal(again.status, 200, 'the link can be opened again within its 24 hours (mail scanners open links first)');
  });

  t.test('the verification token is stored only as a hash and the job only carries it sealed', async (t) => {
    const email = uniqueEmail('sealed');
    const r = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    t.equal(r.status, 200);
    const token = tokenOfLink(linksOf((await smtp.next(email)).text)[0]);
    const rows = await app.db.sql`select extract(epoch from t.expires_at - t.created_at)::int as ttl, t.kind from auth_private.one_time_tokens t join auth.users u on u.id = t.user_id where u.email = ${email}`;
    t.equal(rows.length, 1);
    t.equal(rows[0].kind, 'verification');
    t.equal(rows[0].ttl, 86400, 'valid 24 hours');
    const clear = await app.db.sql`
      select 1 from auth_private.one_time_tokens where position(convert_to(${token}, 'UTF8') in token_hash) > 0
      union all
      select 1 from graphile_worker._private_jobs where payload::text like ${'%' + token + '%'}`;
    t.equal(clear.length, 0, 'no clear token in tables or job payloads');
  });

  t.test('bad verification tokens → 400 invalid or expired token', async (t) => {
    for (const q of ['?token=nope', '?token=', '']) {
      const r = await app.call('GET', `/auth/v1/verify${q}`);
      t.equal(r.status, 400, q);
      t.same(r.body, { error: 'invalid or expired token' });
    }
    const email = uniqueEmail('late');
    await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    const token = tokenOfLink(linksOf((await smtp.next(email)).text)[0]);
    await app.db.sql`update auth_private.one_time_tokens set expires_at = now() - interval '1 second'
      where user_id = (select id from auth.users where email = ${email})`;
    const expired = await app.call('GET', `/auth/v1/verify?token=${token}`);
    t.equal(expired.status, 400);
    t.same(expired.body, { error: 'invalid or expired token' });
    t.equal((await signIn(app, email)).status, 403, 'still awaiting confirmation');
  });

  t.test('a rolled-back signup sends nothing: 409 enqueues no mail', async (t) => {
    const email = uniqueEmail('dup');
    await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    await smtp.next(email);
    const dup = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    t.equal(dup.status, 409);
    t.same(dup.body, { error: 'email already registered' });
    await t.rejects(smtp.next(email, 1500), 'no second mail');
  });

  t.test('admin-created users: email_confirm decides whether they can sign in', async (t) => {
    const confirmed = uniqueEmail('adm-yes');
    const unconfirmed = uniqueEmail('adm-no');
    for (const [email, email_confirm] of [
      [confirmed, true],
      [unconfirmed, false],
    ] as const) {
      const r = await app.call('POST', '/auth/v1/admin/users', { token: app.serviceKey, body: { email, password: PASSWORD, email_confirm } });
      t.equal(r.status, 201);
    }
    t.equal((await signIn(app, confirmed)).status, 200);
    const r = await signIn(app, unconfirmed);
    t.equal(r.status, 403);
    t.same(r.body, { error: 'email not verified' });
  });
});

t.test('REQUIRE_EMAIL_VERIFICATION=false (default): signup signs in at once and sends nothing', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, { env: { SMTP_URL: smtp.url } });
  const email = uniqueEmail('noverify');
  const r = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
  t.equal(r.status, 201);
  t.ok(r.body.access_token);
  t.equal((await signIn(app, email)).status, 200);
  await t.rejects(smtp.next(email, 1000), 'no confirmation mail');
});
