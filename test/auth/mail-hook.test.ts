/**
 * The send-email hook (AUTH_HOOK_SEND_EMAIL, docs/emails.md) replacing SMTP, in both of
 * GoTrue's forms: a SQL function of the app, and a URL signed as Standard Webhooks, here a
 * real local HTTP server that checks the signature itself. A real SMTP receiver proves
 * nothing goes through SMTP; the token the hook gets signs in.
 */
import t from 'tap';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../../src/core/config.ts';
import { captureLog } from '../helpers/log-capture.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { PASSWORD, signUp, sleep, startAuthApp, startSmtp, uniqueEmail } from './helpers.ts';

async function until<T>(get: () => Promise<T | undefined> | T | undefined, what: string, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await get();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`not met in time: ${what}`);
    await sleep(50);
  }
}

interface HookEvent {
  user: { id: string; email: string; user_metadata: Record<string, unknown> };
  email_data: { token: string; token_hash: string; redirect_to: string; email_action_type: string; site_url: string; token_new: string; token_hash_new: string };
}

const ENV = { SITE_URL: 'https://app.plinth.test', API_EXTERNAL_URL: 'https://api.plinth.test' };

t.test('the SQL-function form (pg-functions://), instead of SMTP', async (t) => {
  const db = await createTestDatabase(t);
  await db.sql.unsafe(`
    create schema mailhooks;
    create table mailhooks.sent (id serial primary key, event jsonb not null);
    create function mailhooks.send_email(event jsonb) returns jsonb language plpgsql as $$
    begin
      if event -> 'user' ->> 'email' like 'refuse-%' then
        return '{"error": {"http_code": 403, "message": "not to this address"}}';
      end if;
      insert into mailhooks.sent (event) values (event);
      return '{}';
    end
    $$;
  `);
  const smtp = await startSmtp(t);
  const { lines, log } = captureLog('info');
  const app = await startAuthApp(t, { db, log, env: { ...ENV, SMTP_URL: smtp.url, AUTH_HOOK_SEND_EMAIL: 'pg-functions://postgres/mailhooks/send_email' } });
  const sentTo = async (email: string, action: string) =>
    (await db.sql<{ event: HookEvent }[]>`select event from mailhooks.sent where event -> 'user' ->> 'email' = ${email}
      and event #>> '{email_data,email_action_type}' = ${action}`)[0]?.event;

  const { email, session } = await signUp(app, uniqueEmail('sqlhook'), PASSWORD, { name: 'Ada' });
  t.equal((await app.call('POST', '/auth/v1/magiclink', { body: { email } })).status, 200);
  const event = await until(() => sentTo(email, 'magiclink'), 'the hook got the magic link');
  t.equal(event.user.email, email);
  t.same(event.user.user_metadata, { name: 'Ada' }, 'the User object');
  t.match(event.email_data.token, /^\d{6}$/, 'the magic link\'s 6-digit code');
  t.match(event.email_data, { redirect_to: 'https://app.plinth.test', site_url: 'https://api.plinth.test/auth/v1', token_new: '', token_hash_new: '' });
  t.match(event.email_data.token_hash, /^[A-Za-z0-9_-]{20,}$/);
  const signIn = await app.call('GET', `/auth/v1/magiclink/verify?token=${event.email_data.token_hash}`);
  t.equal(signIn.status, 302, 'the token_hash the hook got signs in');
  t.match(signIn.headers.get('location'), /#access_token=/);

  t.equal((await app.call('PUT', '/auth/v1/user', { token: session.access_token, body: { password: 'a new password here' } })).status, 200);
  const notice = await until(() => sentTo(email, 'password_changed_notification'), 'the change notice went to the hook too');
  t.equal(notice.email_data.token, '');
  await t.rejects(smtp.next(email, 1500), 'nothing went through SMTP');

  const refused = uniqueEmail('refuse');
  await signUp(app, refused);
  t.equal((await app.call('POST', '/auth/v1/magiclink', { body: { email: refused } })).status, 200, 'the request was answered before the mail went');
  const line = await until(() => lines.find((l) => l.msg === 'auth__send_email: the send-email hook refused the mail; dropped'), 'the refusal is logged');
  t.match(line.reason, 'not to this address');
  await until(async () => ((await db.sql`select 1 from graphile_worker.jobs where task_identifier = 'auth__send_email'`).length === 0 ? true : undefined), 'a refusal is final: no job left to retry');
});

t.test('the URL form: signed as Standard Webhooks, checked by a real server; retried after a failure; SUPABASE_COMPAT\'s code', async (t) => {
  const secret = 'v1,whsec_' + randomBytes(32).toString('base64');
  const key = Buffer.from(secret.slice('v1,whsec_'.length), 'base64');
  const received: HookEvent[] = [];
  const failures = new Map<string, number>();
  let badSignatures = 0;
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(req.headers['webhook-id']);
      const ts = String(req.headers['webhook-timestamp']);
      const expected = createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest();
      const ok = String(req.headers['webhook-signature'] ?? '')
        .split(' ')
        .map((s) => s.replace(/,$/, ''))
        .some((s) => s.startsWith('v1,') && Buffer.from(s.slice(3), 'base64').length === 32 && timingSafeEqual(Buffer.from(s.slice(3), 'base64'), expected));
      const fresh = Math.abs(Date.now() / 1000 - Number(ts)) < 300;
      if (!ok || !fresh || req.headers['content-type'] !== 'application/json') {
        badSignatures++;
        res.writeHead(401).end();
        return;
      }
      const event = JSON.parse(body) as HookEvent;
      const email = event.user.email;
      if (email.startsWith('down-') && (failures.get(email) ?? 0) === 0) {
        failures.set(email, 1);
        res.writeHead(503).end();
        return;
      }
      received.push(event);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/send-email`;

  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, { env: { ...ENV, SMTP_URL: smtp.url, SUPABASE_COMPAT: 'true', AUTH_HOOK_SEND_EMAIL: url, AUTH_HOOK_SEND_EMAIL_SECRET: secret } });
  const email = uniqueEmail('down');
  t.equal((await app.call('POST', '/auth/v1/otp', { apikey: app.anonKey, body: { email } })).status, 200);
  const event = await until(() => received.find((e) => e.user.email === email), 'the hook got the mail (after one 503)', 60_000);
  t.equal(failures.get(email), 1, 'the first attempt failed and the job was tried again');
  t.equal(badSignatures, 0, 'every request carried a valid signature');
  t.equal(event.email_data.email_action_type, 'signup', 'GoTrue\'s action: a new account');
  t.match(event.email_data.token, /^\d{6}$/, 'the 6-digit code');
  t.equal(event.email_data.site_url, 'https://api.plinth.test/auth/v1');
  const v = await app.call('POST', '/auth/v1/verify', { apikey: app.anonKey, body: { type: 'email', email, token: event.email_data.token } });
  t.equal(v.status, 200, 'the code the hook got signs in');
  await t.rejects(smtp.next(email, 1500), 'nothing went through SMTP');
});

t.test('configuration: the forms GoTrue takes, a secret for a URL, http only to loopback', async (t) => {
  const base = { JWT_SECRET: 'x'.repeat(40) };
  const secret = 'v1,whsec_' + randomBytes(32).toString('base64');
  t.same(parseConfig({ ...base, AUTH_HOOK_SEND_EMAIL: 'pg-functions://postgres/public/send_email' }).authHookSendEmail, { kind: 'sql', fn: 'public.send_email' });
  t.same(parseConfig({ ...base, AUTH_HOOK_SEND_EMAIL: 'hooks.send_email' }).authHookSendEmail, { kind: 'sql', fn: 'hooks.send_email' });
  t.same(parseConfig({ ...base, AUTH_HOOK_SEND_EMAIL: 'https://mail.example/hook', AUTH_HOOK_SEND_EMAIL_SECRET: `${secret}|${secret}` }).authHookSendEmail, {
    kind: 'http',
    url: 'https://mail.example/hook',
    secrets: [secret.slice('v1,whsec_'.length), secret.slice('v1,whsec_'.length)],
  });
  t.throws(() => parseConfig({ ...base, AUTH_HOOK_SEND_EMAIL: 'https://mail.example/hook' }), { message: /AUTH_HOOK_SEND_EMAIL_SECRET.*required/ });
  t.throws(() => parseConfig({ ...base, AUTH_HOOK_SEND_EMAIL: 'http://mail.example/hook', AUTH_HOOK_SEND_EMAIL_SECRET: secret }), { message: /loopback/ });
  t.throws(() => parseConfig({ ...base, AUTH_HOOK_SEND_EMAIL: 'https://mail.example/hook', AUTH_HOOK_SEND_EMAIL_SECRET: 'whsec_abc' }), { message: /v1,whsec_/ });
  t.throws(() => parseConfig({ ...base, AUTH_HOOK_SEND_EMAIL: 'pg-functions://postgres/Public/x;drop' }), { message: /AUTH_HOOK_SEND_EMAIL/ });
});
