/**
 * SUPABASE_COMPAT: attacks on the mailed 6-digit code and the redirect.
 * - A code is reachable only through POST /verify with its address, under the per-address
 *   limit on tries: no route that hashes a token (/magiclink/verify, /recover/confirm,
 *   `token_hash`) can present `otp:<email>:<code>` and guess it there.
 * - Ten tries per address and hour, then 429, even with the right code.
 * - A mailed link's redirect is checked before the token is used.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, linksOf, startSmtp, uniqueEmail } from './helpers.ts';

function codeOf(text: string): string {
  const m = /code: (\d{6})/.exec(text);
  if (!m) throw new Error(`no code in ${text}`);
  return m[1];
}

t.test('compat attacks', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startApp(t, { env: { SUPABASE_COMPAT: 'true', AUTH_RATE_LIMIT: '0', SMTP_URL: smtp.url, SITE_URL: 'http://app.plinth.test' } });

  t.test('a code cannot be presented as a token to the routes that hash tokens', async (t) => {
    const email = uniqueEmail('hash');
    await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    t.equal((await app.call('POST', '/auth/v1/otp', { body: { email } })).status, 200);
    const code = codeOf((await smtp.next(email)).text);
    const forged = `otp:${email}:${code}`;
    const ml = await app.call('GET', `/auth/v1/magiclink/verify?token=${encodeURIComponent(forged)}`);
    t.equal(ml.status, 403, '/magiclink/verify refuses it (otp_expired)');
    const th = await app.call('POST', '/auth/v1/verify', { body: { type: 'magiclink', token_hash: forged } });
    t.equal(th.status, 403, 'token_hash refuses it');
    t.equal((await app.call('POST', '/auth/v1/recover', { body: { email } })).status, 200);
    let mail = await smtp.next(email);
    if (mail.subject !== 'Reset your password') mail = await smtp.next(email);
    const rc = await app.call('POST', '/auth/v1/recover/confirm', { body: { token: `otp:${email}:${codeOf(mail.text)}`, password: 'an attacker password' } });
    t.equal(rc.status, 403, '/recover/confirm refuses it');
    t.equal((await app.call('POST', '/auth/v1/token?grant_type=password', { body: { email, password: 'an attacker password' } })).status, 400, 'the password is unchanged');
    // The code itself still works where it belongs.
    const v = await app.call('POST', '/auth/v1/verify', { body: { type: 'recovery', email, token: codeOf(mail.text) } });
    t.equal(v.status, 200, 'the code works through POST /verify');
  });

  t.test('ten tries per address and hour, then 429 even with the right code', async (t) => {
    const email = uniqueEmail('tries');
    t.equal((await app.call('POST', '/auth/v1/otp', { body: { email } })).status, 200);
    const code = codeOf((await smtp.next(email)).text);
    const wrong = code === '000000' ? '000001' : '000000';
    for (let i = 0; i < 10; i++) {
      const r = await app.call('POST', '/auth/v1/verify', { body: { type: 'email', email, token: wrong } });
      t.equal(r.body.error_code, 'otp_expired', `try ${i + 1}`);
    }
    const r = await app.call('POST', '/auth/v1/verify', { body: { type: 'email', email, token: code } });
    t.same([r.status, r.body.error_code], [429, 'over_request_rate_limit']);
  });

  t.test('a foreign redirect_to: refused before the token is used', async (t) => {
    const email = uniqueEmail('redir');
    await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    t.equal((await app.call('POST', '/auth/v1/otp?redirect_to=https://evil.example/', { body: { email } })).status, 400, 'refused at the request');
    t.equal((await app.call('POST', '/auth/v1/recover?redirect_to=https://evil.example/', { body: { email } })).status, 400);
    t.equal((await app.call('POST', '/auth/v1/otp', { body: { email } })).status, 200);
    const link = new URL(linksOf((await smtp.next(email)).text)[0]);
    link.searchParams.set('redirect_to', 'https://evil.example/');
    const r = await app.call('GET', link.pathname + link.search);
    t.equal(r.status, 400, 'a link whose redirect was changed is refused');
    t.notOk(r.headers.get('location'), 'no session goes to the foreign page');
    link.searchParams.delete('redirect_to');
    const ok = await app.call('GET', link.pathname + link.search);
    t.equal(ok.status, 303, 'the token was not spent by the refused try');
    t.match(ok.headers.get('location'), /^http:\/\/app\.plinth\.test#access_token=/);
  });
});
