/**
 * A code by email (docs/api/auth.md, "Codes by email and phone sign-in"), default mode, with
 * a real SMTP receiver: every magic-link mail carries a 6-digit code beside its one link;
 * POST /auth/v1/verify {type: email, email, token} signs in; the link and the code are one
 * grant; once; expiring with the link; five wrong codes burn it; ten tries per address and
 * hour; the auth bucket per IP.
 */
import t from 'tap';
import { jwtPayload, linksOf, PASSWORD, startAuthApp, startSmtp, uniqueEmail } from './helpers.ts';

function codeOf(text: string): string {
  const m = /Or enter this code: (\d{6})\n/.exec(text);
  if (!m) throw new Error(`no code in ${text}`);
  return m[1];
}

t.test('a code by email', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, { env: { SMTP_URL: smtp.url, SITE_URL: 'https://app.plinth.test', API_EXTERNAL_URL: 'https://api.plinth.test' } });

  async function mailFor(email: string, path = '/auth/v1/magiclink'): Promise<{ link: string; code: string }> {
    const r = await app.call('POST', path, { body: { email } });
    if (r.status !== 200) throw new Error(`${path}: ${r.status}`);
    const text = (await smtp.next(email)).text;
    const links = linksOf(text);
    if (links.length !== 1) throw new Error(`expected one link, got ${links.length}`);
    return { link: links[0], code: codeOf(text) };
  }
  async function registered(prefix: string): Promise<{ email: string; id: string }> {
    const email = uniqueEmail(prefix);
    const r = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    return { email, id: r.body.user.id };
  }
  const verify = (email: string, token: string, type = 'email') => app.call('POST', '/auth/v1/verify', { body: { type, email, token } });

  t.test('the mail carries one link and a code; the code signs in, once, and spends the link', async (t) => {
    const { email, id } = await registered('code');
    const { link, code } = await mailFor(email);
    t.match(code, /^\d{6}$/);
    const r = await verify(email.toUpperCase(), code);
    t.equal(r.status, 200, 'signed in (the address is case-insensitive)');
    t.equal(r.headers.get('cache-control'), 'no-store');
    t.same(Object.keys(r.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type', 'user'], "plinth's Session");
    const claims = jwtPayload(r.body.access_token);
    t.equal(claims.sub, id);
    t.equal(claims.email, email);
    t.same((claims.amr as { method: string }[]).map((a) => a.method), ['otp'], 'amr otp');
    t.equal((await app.call('GET', '/auth/v1/user', { token: r.body.access_token })).status, 200);

    const again = await verify(email, code);
    t.same([again.status, again.body], [400, { error: 'invalid or expired token' }], 'once');
    const u = new URL(link);
    const viaLink = await app.call('GET', u.pathname + u.search);
    t.same([viaLink.status, viaLink.body], [400, { error: 'invalid or expired token' }], 'the link of the same mail is spent');
  });

  t.test('the link spends the code; a newer mail spends the older', async (t) => {
    const { email } = await registered('link');
    const first = await mailFor(email);
    const second = await mailFor(email);
    t.equal((await verify(email, first.code)).status, 400, 'the older code is spent by the newer mail');
    const u = new URL(second.link);
    t.equal((await app.call('GET', u.pathname + u.search)).status, 302, 'the link signs in');
    t.equal((await verify(email, second.code)).status, 400, 'and its code no longer does');
  });

  t.test('five wrong codes burn it; the link stays good', async (t) => {
    const { email } = await registered('wrong');
    const { link, code } = await mailFor(email);
    const wrong = code === '000000' ? '000001' : '000000';
    for (let i = 0; i < 5; i++) t.same((await verify(email, wrong)).body, { error: 'invalid or expired token' }, `wrong ${i + 1}`);
    t.equal((await verify(email, code)).status, 400, 'the right code after five wrong ones: burnt');
    const u = new URL(link);
    t.equal((await app.call('GET', u.pathname + u.search)).status, 302, 'the link (not guessable) still works');
  });

  t.test('expires with the link (1 hour)', async (t) => {
    const { email } = await registered('exp');
    const { code } = await mailFor(email);
    const [{ n }] = await app.db.sql`select count(*)::int as n from auth_private.one_time_tokens t join auth.users u on u.id = t.user_id
      where u.email = ${email} and t.used_at is null and t.expires_at between now() + interval '59 minutes' and now() + interval '61 minutes'`;
    t.equal(n, 2, 'the link and the code: 1 hour each');
    await app.db.sql`update auth_private.one_time_tokens t set expires_at = now() - interval '1 second' from auth.users u
      where u.id = t.user_id and u.email = ${email}`;
    t.same((await verify(email, code)).body, { error: 'invalid or expired token' }, 'expired');
  });

  t.test('ten tries per address and hour, then 429 even with the right code', async (t) => {
    const { email } = await registered('tries');
    for (let i = 0; i < 10; i++) await verify(email, String(100000 + i));
    const { code } = await mailFor(email);
    t.same([(await verify(email, code)).status], [429]);
    t.equal((await verify(uniqueEmail('other'), '123456')).status, 400, 'another address is not limited');
  });

  t.test('POST /otp with an email: the magic-link mail, the same answer for any address; no account made', async (t) => {
    const { email } = await registered('otp');
    const ghost = uniqueEmail('ghost');
    const a = await app.call('POST', '/auth/v1/otp', { body: { email } });
    const b = await app.call('POST', '/auth/v1/otp', { body: { email: ghost } });
    t.same([a.status, a.text], [b.status, b.text], 'identical answers');
    t.equal((await verify(email, codeOf((await smtp.next(email)).text))).status, 200, 'its code signs in');
    await t.rejects(smtp.next(ghost, 1000), 'no mail to an unknown address');
    const [{ n }] = await app.db.sql`select count(*)::int as n from auth.users where email = ${ghost}`;
    t.equal(n, 0);
  });

  t.test('bad requests', async (t) => {
    t.same((await verify('someone@example.com', '123456', 'recovery')).body, { error: 'unsupported verification type' });
    t.same((await app.call('POST', '/auth/v1/verify', { body: { type: 'email', token: '123456' } })).body, { error: 'invalid request body' });
    t.same((await app.call('POST', '/auth/v1/verify', { body: { type: 'email', email: 'nope', token: '1' } })).body, { error: 'invalid email address' });
    t.same((await verify(uniqueEmail('nobody'), '123456')).body, { error: 'invalid or expired token' }, 'an unknown address: the same as a wrong code');
  });
});

t.test('the auth bucket per IP covers POST /verify', async (t) => {
  const app = await startAuthApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '2' } });
  const codes = [];
  for (let i = 0; i < 3; i++) codes.push((await app.call('POST', '/auth/v1/verify', { body: { type: 'email', email: uniqueEmail('ip'), token: '123456' } })).status);
  t.same(codes, [400, 400, 429]);
});
