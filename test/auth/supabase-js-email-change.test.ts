/**
 * GoTrue's email_change under SUPABASE_COMPAT=true, through `@supabase/supabase-js`
 * unchanged (docs/api/supabase.md, "Changing the address"): updateUser({email}) keeps the
 * address and mails the new one a link and a code (real SMTP receiver); verifyOtp with the
 * code or the link's token_hash, or the link itself, applies it; a taken address fails
 * cleanly. Without the setting the same request changes the address at once.
 */
import t from 'tap';
import { createClient, type SupabaseClient } from '@supabase/supabase-js';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, linksOf, startSmtp, uniqueEmail } from './helpers.ts';

const SITE = 'http://app.plinth.test';

function codeOf(text: string): string {
  const m = /code: (\d{6})/.exec(text);
  if (!m) throw new Error(`no code in ${text}`);
  return m[1];
}

function tokenOf(text: string): string {
  const links = linksOf(text);
  if (links.length !== 1) throw new Error(`expected one link in ${text}`);
  return new URL(links[0]).searchParams.get('token') ?? '';
}

t.test('email_change with SUPABASE_COMPAT=true', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startApp(t, { env: { SUPABASE_COMPAT: 'true', AUTH_RATE_LIMIT: '0', SMTP_URL: smtp.url, SITE_URL: SITE } });
  const client = (): SupabaseClient =>
    createClient(app.url, app.anonKey, { auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false } });
  async function signedUp(prefix: string): Promise<{ sb: SupabaseClient; email: string }> {
    const sb = client();
    const email = uniqueEmail(prefix);
    const up = await sb.auth.signUp({ email, password: PASSWORD });
    if (up.error) throw up.error;
    return { sb, email };
  }

  t.test('updateUser({email}) → the code mailed to the new address → verifyOtp', async (t) => {
    const { sb, email } = await signedUp('ec-old');
    const next = uniqueEmail('ec-new');
    const u = await sb.auth.updateUser({ email: next.toUpperCase() });
    t.equal(u.error, null, 'updateUser');
    t.equal(u.data.user?.email, email, 'the address is not changed at once');
    t.equal(u.data.user?.new_email, next, 'new_email');
    t.ok(u.data.user?.email_change_sent_at, 'email_change_sent_at');
    t.equal((await sb.auth.getUser()).data.user?.email, email, 'getUser: still the former address');

    const mail = await smtp.next(next);
    t.match(mail.subject, /new email/i, 'the email_change mail, to the new address');
    t.match(mail.text, next, 'it names the new address');
    const link = linksOf(mail.text)[0];
    t.equal(new URL(link).searchParams.get('type'), 'email_change', 'its link says email_change');
    const code = codeOf(mail.text);
    const wrong = await sb.auth.verifyOtp({ email: next, token: code === '000000' ? '111111' : '000000', type: 'email_change' });
    t.equal(wrong.error?.code, 'otp_expired', 'a wrong code');
    const other = await sb.auth.verifyOtp({ email, token: code, type: 'email_change' });
    t.equal(other.error?.code, 'otp_expired', 'the code names the new address, not the former');
    const v = await sb.auth.verifyOtp({ email: next, token: code, type: 'email_change' });
    t.equal(v.error, null, 'verifyOtp email_change');
    t.equal(v.data.user?.email, next, 'the session is the new address\'s');
    t.ok(v.data.user?.email_confirmed_at, 'confirmed');
    t.equal(v.data.user?.new_email, undefined, 'nothing pending');
    t.equal(v.data.user?.identities?.[0]?.identity_data?.email, next, 'the identity names the new address');
    const me = await sb.auth.getUser();
    t.equal(me.data.user?.email, next, 'getUser shows the new address');
    const notice = await smtp.next(email);
    t.match(notice.text, next, 'the former address is told');
    t.equal((await sb.auth.verifyOtp({ email: next, token: code, type: 'email_change' })).error?.code, 'otp_expired', 'the code works once');
    t.equal((await client().auth.signInWithPassword({ email: next, password: PASSWORD })).error, null, 'the new address signs in');
    t.equal((await client().auth.signInWithPassword({ email, password: PASSWORD })).error?.code, 'invalid_credentials', 'the former no longer');
  });

  t.test('verifyOtp({token_hash}) with the link\'s token; a newer request replaces the older', async (t) => {
    const { sb } = await signedUp('ec-th');
    const first = uniqueEmail('ec-th1');
    const next = uniqueEmail('ec-th2');
    t.equal((await sb.auth.updateUser({ email: first })).error, null);
    const old = tokenOf((await smtp.next(first)).text);
    t.equal((await sb.auth.updateUser({ email: next })).error, null, 'asked again, for another address');
    const token = tokenOf((await smtp.next(next)).text);
    t.equal((await sb.auth.verifyOtp({ token_hash: old, type: 'email_change' })).error?.code, 'otp_expired', 'the older link no longer works');
    const v = await sb.auth.verifyOtp({ token_hash: token, type: 'email_change' });
    t.equal(v.error, null, 'verifyOtp token_hash');
    t.equal((await sb.auth.getUser()).data.user?.email, next, 'getUser shows the new address');
  });

  t.test('the link: GET /verify?type=email_change redirects with a session', async (t) => {
    const { sb } = await signedUp('ec-link');
    const next = uniqueEmail('ec-link2');
    t.equal((await sb.auth.updateUser({ email: next })).error, null);
    const u = new URL(linksOf((await smtp.next(next)).text)[0]);
    const r = await fetch(app.url + u.pathname + u.search, { redirect: 'manual' });
    t.equal(r.status, 303);
    const location = r.headers.get('location') ?? '';
    t.ok(location.startsWith(`${SITE}#`), 'to SITE_URL');
    const fragment = new URLSearchParams(location.split('#')[1]);
    t.equal(fragment.get('type'), 'email_change');
    const token = fragment.get('access_token') ?? '';
    t.equal((await client().auth.getUser(token)).data.user?.email, next, 'the fragment\'s session is the new address\'s');
    const again = await fetch(app.url + u.pathname + u.search, { redirect: 'manual' });
    t.match(again.headers.get('location') ?? '', /error_code=otp_expired/, 'the link works once');
  });

  t.test('a taken address: at once, or taken meanwhile (verify fails, nothing changed)', async (t) => {
    const { sb, email } = await signedUp('ec-taken');
    const held = await signedUp('ec-held');
    const now = await sb.auth.updateUser({ email: held.email });
    t.equal(now.error?.code, 'email_exists', 'an address another account holds: email_exists at once');
    t.equal(now.error?.status, 422);

    const wanted = uniqueEmail('ec-wanted');
    t.equal((await sb.auth.updateUser({ email: wanted })).error, null, 'pending');
    const mail = await smtp.next(wanted);
    t.equal((await client().auth.signUp({ email: wanted, password: PASSWORD })).error, null, 'someone else takes the address meanwhile');
    const v = await sb.auth.verifyOtp({ email: wanted, token: codeOf(mail.text), type: 'email_change' });
    t.equal(v.error?.code, 'email_exists', 'verify: email_exists');
    t.equal((await client().auth.signInWithPassword({ email, password: PASSWORD })).error, null, 'the account keeps its address');
    const u = new URL(linksOf(mail.text)[0]);
    const r = await fetch(app.url + u.pathname + u.search, { redirect: 'manual' });
    t.match(r.headers.get('location') ?? '', /error_code=email_exists/, 'the link: an error fragment');
  });

  t.test('the same address is no change; metadata beside an email change applies at once', async (t) => {
    const { sb, email } = await signedUp('ec-same');
    const same = await sb.auth.updateUser({ email: email.toUpperCase() });
    t.equal(same.error, null);
    t.equal(same.data.user?.new_email, undefined, 'nothing pending');
    const next = uniqueEmail('ec-meta');
    const both = await sb.auth.updateUser({ email: next, data: { plan: 'pro' } });
    t.equal(both.error, null);
    t.equal(both.data.user?.user_metadata.plan, 'pro', 'the metadata is set');
    t.equal(both.data.user?.email, email, 'the address waits');
    t.equal(both.data.user?.new_email, next);
    await smtp.next(next);
  });
});

t.test('the default mode changes the address at once (no email_change mail)', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startApp(t, { env: { AUTH_RATE_LIMIT: '0', SMTP_URL: smtp.url, SITE_URL: SITE } });
  const email = uniqueEmail('ec-plain');
  const up = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
  t.equal(up.status, 201);
  const next = uniqueEmail('ec-plain2');
  const put = await app.call('PUT', '/auth/v1/user', { token: up.body.access_token, body: { email: next } });
  t.equal(put.status, 200);
  t.equal(put.body.email, next, 'changed at once');
  t.equal(put.body.new_email, undefined);
  const notice = await smtp.next(email);
  t.match(notice.text, next, 'the former address is told');
  t.equal(smtp.mails.filter((m) => m.to.includes(next)).length, 0, 'nothing is mailed to the new address');
  const code = await app.call('POST', '/auth/v1/verify', { body: { type: 'email_change', email: next, token: '123456' } });
  t.equal(code.status, 400, 'no email_change verification without the setting');
});
