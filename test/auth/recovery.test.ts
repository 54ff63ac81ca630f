/**
 * Password recovery (interface §3.3, contract §4) with a real SMTP receiver: the same
 * answer for known and unknown addresses, the recovery link under SITE_URL, the token
 * used once, expired tokens, the password rules of recover/confirm, and that using one
 * recovery or magic-link token spends the user's others.
 */
import t from 'tap';
import { PASSWORD, linksOf, refresh, signIn, signUp, startAuthApp, startSmtp, tokenOfLink, uniqueEmail } from './helpers.ts';

const NEW_PASSWORD = 'a brand new passphrase';

t.test('password recovery', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, { env: { SMTP_URL: smtp.url, SITE_URL: 'https://app.plinth.test' } });

  async function recoveryToken(email: string): Promise<string> {
    const r = await app.call('POST', '/auth/v1/recover', { body: { email } });
    if (r.status !== 200) throw new Error(`recover: ${r.status}`);
    const mail = await smtp.next(email);
    const links = linksOf(mail.text);
    if (links.length !== 1) throw new Error(`expected one link, got ${links.length}`);
    return tokenOfLink(links[0]);
  }

  t.test('§3.3 issued: same 200 answer for registered and unknown addresses; mail only to the registered one', async (t) => {
    const { email } = await signUp(app);
    const unknown = uniqueEmail('ghost');
    const known = await app.call('POST', '/auth/v1/recover', { body: { email } });
    const ghost = await app.call('POST', '/auth/v1/recover', { body: { email: unknown } });
    t.equal(known.status, 200);
    t.equal(ghost.status, 200);
    t.same(known.body, ghost.body, 'identical bodies');
    t.type(known.body.message, 'string');
    const mail = await smtp.next(email);
    t.equal(mail.subject, 'Reset your password');
    const links = linksOf(mail.text);
    t.equal(links.length, 1, 'exactly one link');
    t.match(links[0], /^https:\/\/app\.plinth\.test\/reset-password\?token=[A-Za-z0-9_-]+$/, 'SITE_URL/reset-password?token=…');
    await t.rejects(smtp.next(unknown, 1000), 'nothing sent to an unknown address');
  });

  t.test('§3.3 issued → used: password updated, no tokens; old password refused; sessions revoked', async (t) => {
    const { email, session } = await signUp(app);
    const token = await recoveryToken(email);
    const r = await app.call('POST', '/auth/v1/recover/confirm', { body: { token, password: NEW_PASSWORD } });
    t.equal(r.status, 200);
    t.same(Object.keys(r.body), ['message'], 'a message, no tokens');
    t.equal((await signIn(app, email, PASSWORD)).status, 401, 'the old password no longer works');
    t.equal((await signIn(app, email, NEW_PASSWORD)).status, 200, 'the new one does');
    const old = await refresh(app, session.refresh_token);
    t.same(old.body, { error: 'invalid refresh token' }, 'sessions from before the reset are ended');
  });

  t.test('§3.3 used → 400 invalid or expired token, whatever the password', async (t) => {
    const { email } = await signUp(app);
    const token = await recoveryToken(email);
    t.equal((await app.call('POST', '/auth/v1/recover/confirm', { body: { token, password: NEW_PASSWORD } })).status, 200);
    for (const password of [NEW_PASSWORD, 'another passphrase', 'short', 'x'.repeat(300)]) {
      const r = await app.call('POST', '/auth/v1/recover/confirm', { body: { token, password } });
      t.equal(r.status, 400, `password of ${password.length}`);
      t.same(r.body, { error: 'invalid or expired token' });
    }
  });

  t.test('§3.3 expired → 400 invalid or expired token; lifetime is 1 hour', async (t) => {
    const { email } = await signUp(app);
    const token = await recoveryToken(email);
    const [row] = await app.db.sql`select extract(epoch from t.expires_at - t.created_at)::int as ttl from auth_private.one_time_tokens t
      join auth.users u on u.id = t.user_id where u.email = ${email} and t.kind = 'recovery'`;
    t.equal(row.ttl, 3600);
    await app.db.sql`update auth_private.one_time_tokens set expires_at = now() - interval '1 second'
      where user_id = (select id from auth.users where email = ${email})`;
    for (const password of [NEW_PASSWORD, 'short']) {
      const r = await app.call('POST', '/auth/v1/recover/confirm', { body: { token, password } });
      t.equal(r.status, 400);
      t.same(r.body, { error: 'invalid or expired token' });
    }
    t.equal((await signIn(app, email)).status, 200, 'the password is unchanged');
  });

  t.test('unknown token → 400 invalid or expired token', async (t) => {
    const r = await app.call('POST', '/auth/v1/recover/confirm', { body: { token: 'made-up', password: NEW_PASSWORD } });
    t.equal(r.status, 400);
    t.same(r.body, { error: 'invalid or expired token' });
  });

  t.test('a valid token with a password outside 8–256 → the length message; the token stays usable', async (t) => {
    const { email } = await signUp(app);
    const token = await recoveryToken(email);
    const short = await app.call('POST', '/auth/v1/recover/confirm', { body: { token, password: '1234567' } });
    t.equal(short.status, 400);
    t.same(short.body, { error: 'password must be at least 8 characters' });
    const long = await app.call('POST', '/auth/v1/recover/confirm', { body: { token, password: 'z'.repeat(257) } });
    t.equal(long.status, 400);
    t.same(long.body, { error: 'password must be at most 256 characters' });
    t.equal((await app.call('POST', '/auth/v1/recover/confirm', { body: { token, password: NEW_PASSWORD } })).status, 200);
  });

  t.test('malformed bodies and addresses', async (t) => {
    for (const body of [{}, { email: 5 }, { emails: 'a@example.com' }]) {
      const r = await app.call('POST', '/auth/v1/recover', { body });
      t.equal(r.status, 400);
      t.same(r.body, { error: 'invalid request body' });
    }
    const bad = await app.call('POST', '/auth/v1/recover', { body: { email: 'not-an-address' } });
    t.equal(bad.status, 400);
    t.same(bad.body, { error: 'invalid email address' });
    for (const body of [{ token: 'x' }, { password: NEW_PASSWORD }, { token: 1, password: NEW_PASSWORD }]) {
      const r = await app.call('POST', '/auth/v1/recover/confirm', { body });
      t.equal(r.status, 400);
      t.same(r.body, { error: 'invalid request body' });
    }
  });

  t.test('using a recovery or magic-link token spends the user\'s other ones', async (t) => {
    const magicToken = async (email: string) => {
      t.equal((await app.call('POST', '/auth/v1/magiclink', { body: { email } })).status, 200);
      return tokenOfLink(linksOf((await smtp.next(email)).text)[0]);
    };
    const { email } = await signUp(app);
    const firstRecovery = await recoveryToken(email);
    const magic = await magicToken(email);
    const secondRecovery = await recoveryToken(email);
    const used = await app.call('POST', '/auth/v1/recover/confirm', { body: { token: secondRecovery, password: NEW_PASSWORD } });
    t.equal(used.status, 200, 'the latest recovery link is used');
    const older = await app.call('POST', '/auth/v1/recover/confirm', { body: { token: firstRecovery, password: 'the attacker\'s choice' } });
    t.equal(older.status, 400, 'an older recovery link is spent');
    t.same(older.body, { error: 'invalid or expired token' });
    const link = await app.call('GET', `/auth/v1/magiclink/verify?token=${encodeURIComponent(magic)}`);
    t.equal(link.status, 400, 'so is the outstanding magic link');
    t.same(link.body, { error: 'invalid or expired token' });
    t.equal((await signIn(app, email, NEW_PASSWORD)).status, 200, 'the password set with the used link stands');

    const { email: other } = await signUp(app);
    const one = await magicToken(other);
    const two = await magicToken(other);
    const recovery = await recoveryToken(other);
    t.equal((await app.call('GET', `/auth/v1/magiclink/verify?token=${encodeURIComponent(two)}`)).status, 302, 'a magic link is used');
    t.equal((await app.call('GET', `/auth/v1/magiclink/verify?token=${encodeURIComponent(one)}`)).status, 400, 'the other magic link is spent');
    const late = await app.call('POST', '/auth/v1/recover/confirm', { body: { token: recovery, password: 'the attacker\'s choice' } });
    t.equal(late.status, 400, 'and the recovery link');
    t.equal((await signIn(app, other, 'the attacker\'s choice')).status, 401, 'which set nothing');
  });

  t.test('recovery links of a changed address stop working', async (t) => {
    const { email, session } = await signUp(app);
    const token = await recoveryToken(email);
    const moved = await app.call('PATCH', '/auth/v1/user', { token: session.access_token, body: { email: uniqueEmail('moved') } });
    t.equal(moved.status, 200);
    const r = await app.call('POST', '/auth/v1/recover/confirm', { body: { token, password: NEW_PASSWORD } });
    t.equal(r.status, 400);
    t.same(r.body, { error: 'invalid or expired token' });
  });
});
