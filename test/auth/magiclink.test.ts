/**
 * Magic link (interface §4.2, contract §4) with a real SMTP receiver: sent only to
 * registered addresses with the same answer either way; the link under API_EXTERNAL_URL;
 * GET …/magiclink/verify → 302 to SITE_URL with the token fragment; once; 1 hour.
 */
import t from 'tap';
import { PASSWORD, jwtPayload, linksOf, refresh, signIn, startAuthApp, startSmtp, tokenOfLink, uniqueEmail } from './helpers.ts';

t.test('magic link', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, {
    env: { SMTP_URL: smtp.url, SITE_URL: 'https://app.plinth.test', API_EXTERNAL_URL: 'https://api.plinth.test' },
  });

  async function linkFor(email: string): Promise<string> {
    const r = await app.call('POST', '/auth/v1/magiclink', { body: { email } });
    if (r.status !== 200) throw new Error(`magiclink: ${r.status}`);
    const links = linksOf((await smtp.next(email)).text);
    if (links.length !== 1) throw new Error(`expected one link, got ${links.length}`);
    return links[0];
  }

  t.test('sent to a registered address only; same answer either way', async (t) => {
    const email = uniqueEmail('ml');
    await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    const ghost = uniqueEmail('ghost');
    const a = await app.call('POST', '/auth/v1/magiclink', { body: { email } });
    const b = await app.call('POST', '/auth/v1/magiclink', { body: { email: ghost } });
    t.equal(a.status, 200);
    t.equal(b.status, 200);
    t.same(a.body, b.body);
    t.type(a.body.message, 'string');
    const mail = await smtp.next(email);
    const links = linksOf(mail.text);
    t.equal(links.length, 1, 'exactly one link');
    t.match(links[0], /^https:\/\/api\.plinth\.test\/auth\/v1\/magiclink\/verify\?token=[A-Za-z0-9_-]+$/);
    await t.rejects(smtp.next(ghost, 1000), 'no mail to an unknown address');
    const [{ n }] = await app.db.sql`select count(*)::int as n from auth.users where email = ${ghost}`;
    t.equal(n, 0, 'no account is created');
  });

  t.test('verify → 302 to SITE_URL#access_token=…&refresh_token=…&token_type=bearer&expires_in=…', async (t) => {
    const email = uniqueEmail('ml');
    const signup = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    const link = await linkFor(email);
    const u = new URL(link);
    const head = await app.call('HEAD', u.pathname + u.search);
    t.equal(head.status, 404, 'HEAD (a link preview) does not use the token');
    const r = await app.call('GET', u.pathname + u.search);
    t.equal(r.status, 302);
    t.equal(r.headers.get('cache-control'), 'no-store');
    const location = r.headers.get('location')!;
    t.match(location, /^https:\/\/app\.plinth\.test#access_token=/);
    const fragment = new URLSearchParams(location.split('#')[1]);
    t.same([...fragment.keys()], ['access_token', 'refresh_token', 'token_type', 'expires_in']);
    t.equal(fragment.get('token_type'), 'bearer');
    t.equal(fragment.get('expires_in'), '3600');
    const claims = jwtPayload(fragment.get('access_token')!);
    t.equal(claims.sub, signup.body.user.id);
    t.equal(claims.email, email);
    t.equal(claims.role, 'authenticated');
    t.not(claims.session_id, jwtPayload(signup.body.access_token).session_id, 'a new family');
    const me = await app.call('GET', '/auth/v1/user', { token: fragment.get('access_token')! });
    t.equal(me.status, 200);
    t.equal((await refresh(app, fragment.get('refresh_token')!)).status, 200, 'the refresh token works');

    const again = await app.call('GET', u.pathname + u.search);
    t.equal(again.status, 400, 'once');
    t.same(again.body, { error: 'invalid or expired token' });
  });

  t.test('unknown, missing and expired tokens → 400 invalid or expired token; lifetime 1 hour', async (t) => {
    for (const q of ['?token=unknown', '?token=', '']) {
      const r = await app.call('GET', `/auth/v1/magiclink/verify${q}`);
      t.equal(r.status, 400, q);
      t.same(r.body, { error: 'invalid or expired token' });
    }
    const email = uniqueEmail('ml-exp');
    await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    const token = tokenOfLink(await linkFor(email));
    const [row] = await app.db.sql`select extract(epoch from expires_at - created_at)::int as ttl from auth_private.one_time_tokens
      where user_id = (select id from auth.users where email = ${email}) and kind = 'magic_link'`;
    t.equal(row.ttl, 3600);
    await app.db.sql`update auth_private.one_time_tokens set expires_at = now() - interval '1 second'
      where user_id = (select id from auth.users where email = ${email})`;
    const r = await app.call('GET', `/auth/v1/magiclink/verify?token=${token}`);
    t.equal(r.status, 400);
    t.same(r.body, { error: 'invalid or expired token' });
  });

  t.test('malformed requests', async (t) => {
    const bad = await app.call('POST', '/auth/v1/magiclink', { body: { email: 'nope' } });
    t.equal(bad.status, 400);
    t.same(bad.body, { error: 'invalid email address' });
    const none = await app.call('POST', '/auth/v1/magiclink', {});
    t.equal(none.status, 400);
    t.same(none.body, { error: 'invalid request body' });
  });
});

t.test('with REQUIRE_EMAIL_VERIFICATION=true a magic link confirms the address', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, { env: { SMTP_URL: smtp.url, REQUIRE_EMAIL_VERIFICATION: 'true' } });
  const email = uniqueEmail('ml-v');
  t.equal((await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } })).status, 200);
  await smtp.next(email); // the verification mail, not opened
  t.equal((await signIn(app, email)).status, 403);
  await app.call('POST', '/auth/v1/magiclink', { body: { email } });
  const u = new URL(linksOf((await smtp.next(email)).text)[0]);
  const r = await app.call('GET', u.pathname + u.search);
  t.equal(r.status, 302);
  const fragment = new URLSearchParams(r.headers.get('location')!.split('#')[1]);
  const me = await app.call('GET', '/auth/v1/user', { token: fragment.get('access_token')! });
  t.equal(me.status, 200, 'the magic link signs in');
  const [row] = await app.db.sql`select email_confirmed_at is not null as confirmed from auth.users where email = ${email}`;
  t.equal(row.confirmed, true, 'the address counts as confirmed');
  // The sign-up's password was set before anyone proved owning the address: it may be a
  // squatter's, so the proof removes it (see takeover.test.ts).
  t.equal((await signIn(app, email)).status, 401, 'the password chosen before the proof no longer signs in');
  const set = await app.call('PATCH', '/auth/v1/user', { token: fragment.get('access_token')!, body: { password: 'a password after the proof' } });
  t.equal(set.status, 200);
  t.equal((await signIn(app, email, 'a password after the proof')).status, 200, 'one set after it does');
});
