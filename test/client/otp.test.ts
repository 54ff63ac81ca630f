/**
 * The client's one-time codes against a real plinth: signInWithOtp({email}) and the code of
 * the magic-link mail (real SMTP receiver) through verifyOtp({email, token, type: 'email'});
 * signInWithOtp({phone}) with a SQL-function send-SMS hook and verifyOtp({phone, token, type: 'sms'}).
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, startSmtp, uniqueEmail } from '../auth/helpers.ts';
import { createClient } from '../../src/client/index.ts';

const smtp = await startSmtp(t);
const app = await startApp(t, {
  env: { AUTH_RATE_LIMIT: '0', SMTP_URL: smtp.url, AUTH_HOOK_SEND_SMS: 'pg-functions://postgres/public/keep_sms' },
});
await app.db.sql.unsafe(`
  create table public.kept_sms (phone text, otp text);
  create function public.keep_sms(event jsonb) returns jsonb language sql as $$
    insert into public.kept_sms values ('+' || (event -> 'user' ->> 'phone'), event -> 'sms' ->> 'otp');
    select '{}'::jsonb
  $$;`);

t.test('a code from the magic-link mail signs in', async (t) => {
  const email = uniqueEmail('client-code');
  const c = createClient(app.url, app.anonKey);
  t.equal((await c.auth.signUp({ email, password: PASSWORD })).error, null);
  await c.auth.signOut();
  t.equal((await c.auth.signInWithOtp({ email })).error, null);
  const code = /Or enter this code: (\d{6})/.exec((await smtp.next(email)).text)?.[1] ?? '';
  const wrong = await c.auth.verifyOtp({ type: 'email', email, token: code === '000000' ? '000001' : '000000' });
  t.same([wrong.error?.status, wrong.error?.message], [400, 'invalid or expired token']);
  const v = await c.auth.verifyOtp({ type: 'email', email, token: code });
  t.equal(v.error, null);
  t.equal(v.data?.user?.email, email);
  t.equal((await c.auth.getSession()).data?.session?.user?.email, email, 'the session is kept');
});

t.test('a code by SMS signs in', async (t) => {
  const phone = '+4915' + String(Date.now()).slice(-9);
  const c = createClient(app.url, app.anonKey);
  const sent = await c.auth.signInWithOtp({ phone, options: { data: { name: 'Ada' } } });
  t.equal(sent.error, null);
  let token = '';
  const end = Date.now() + 15_000;
  while (token === '' && Date.now() < end) {
    const rows = await app.db.sql<{ otp: string }[]>`select otp from public.kept_sms where phone = ${phone}`;
    if (rows.length > 0) token = rows[0].otp;
    else await new Promise((r) => setTimeout(r, 50));
  }
  const v = await c.auth.verifyOtp({ type: 'sms', phone, token });
  t.equal(v.error, null);
  t.equal(v.data?.user?.phone, phone);
  t.same(v.data?.user?.user_metadata, { name: 'Ada' });
});
