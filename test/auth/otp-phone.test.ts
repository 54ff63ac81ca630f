/**
 * Phone sign-in (docs/api/auth.md, "Codes by email and phone sign-in"): POST /auth/v1/otp
 * with a phone, the code delivered through the send-SMS hook — a SQL function that stores
 * it in a table, and a real HTTP server on loopback that checks the Standard Webhooks
 * signature — and POST /auth/v1/verify {type: sms} signing in; E.164 only; the same answer
 * for every number; a per-number limit; no hook, a clear 400; GoTrue's shapes through
 * supabase-js under SUPABASE_COMPAT.
 */
import t from 'tap';
import { createHmac, randomInt, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient } from '@supabase/supabase-js';
import type { TestApp } from '../helpers/app.ts';
import { jwtPayload, startAuthApp } from './helpers.ts';

const HOOK_SQL = `
  create table if not exists public.sms_outbox (phone text not null, otp text not null, user_id uuid, sent_at timestamptz not null default now());
  create or replace function public.store_sms(event jsonb) returns jsonb language sql as $$
    insert into public.sms_outbox (phone, otp, user_id)
      values ('+' || (event -> 'user' ->> 'phone'), event -> 'sms' ->> 'otp', (event -> 'user' ->> 'id')::uuid);
    select '{}'::jsonb
  $$;`;

interface Teardown {
  teardown(fn: () => unknown): void;
}

function uniquePhone(): string {
  return `+1555${String(randomInt(0, 10_000_000)).padStart(7, '0')}`;
}

/** Wait for a condition, with a deadline. */
async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function storedCode(app: TestApp, phone: string, skip = 0): Promise<string> {
  return until(`an SMS to ${phone}`, async () => {
    const rows = await app.db.sql<{ otp: string }[]>`select otp from public.sms_outbox where phone = ${phone} order by sent_at offset ${skip} limit 1`;
    return rows[0]?.otp;
  });
}

async function sqlHookApp(t: Teardown, env: Record<string, string> = {}): Promise<TestApp> {
  const app = await startAuthApp(t, { env: { AUTH_HOOK_SEND_SMS: 'pg-functions://postgres/public/store_sms', ...env } });
  await app.db.sql.unsafe(HOOK_SQL);
  return app;
}

t.test('phone sign-in through a SQL-function hook (default mode)', async (t) => {
  const app = await sqlHookApp(t, { SMS_RATE_LIMIT_PER_HOUR: '3' });
  const verify = (phone: string, token: string) => app.call('POST', '/auth/v1/verify', { body: { type: 'sms', phone, token } });

  t.test('a code delivered by the hook signs in; once', async (t) => {
    const phone = uniquePhone();
    const typed = `${phone.slice(0, 2)} (${phone.slice(2, 5)}) ${phone.slice(5, 8)}-${phone.slice(8)}`;
    const r = await app.call('POST', '/auth/v1/otp', { body: { phone: typed, data: { plan: 'free' } } });
    t.same([r.status, r.body], [200, { message: 'if the number can sign in, a code has been sent' }]);
    const code = await storedCode(app, phone);
    t.match(code, /^\d{6}$/);
    const s = await verify(phone.slice(1), code); // GoTrue's form without the +
    t.equal(s.status, 200, 'signed in');
    t.equal(s.body.user.phone, phone, 'the User carries the phone in E.164');
    t.equal(s.body.user.email, null);
    t.same(s.body.user.user_metadata, { plan: 'free' }, 'the data of the request that created the account');
    const claims = jwtPayload(s.body.access_token);
    t.equal(claims.phone, phone, 'the token carries the phone');
    t.same((claims.amr as { method: string }[]).map((a) => a.method), ['otp'], 'amr otp');
    t.same(claims.app_metadata, { provider: 'phone', providers: ['phone'] });
    t.equal((await app.call('GET', '/auth/v1/user', { token: s.body.access_token })).body.phone, phone);
    t.same((await verify(phone, code)).body, { error: 'invalid or expired token' }, 'once');
    const [u] = await app.db.sql`select phone_confirmed_at is not null as proven from auth.users where phone = ${phone}`;
    t.equal(u.proven, true, 'the number is proven');
    const admin = await app.call('GET', `/auth/v1/admin/users/${s.body.user.id}`, { token: app.serviceKey });
    t.same([admin.status, admin.body.phone, typeof admin.body.phone_confirmed_at], [200, phone, 'string'], 'the admin API shows the phone');
    const again = await app.call('POST', '/auth/v1/otp', { body: { phone } });
    t.equal(again.status, 200, 'an existing number gets a new code');
    t.equal((await verify(phone, await storedCode(app, phone, 1))).status, 200, 'which signs in the same account');
  });

  t.test('E.164 only', async (t) => {
    for (const phone of ['0612345678', 'abc', '+0123456789', '+1 555', '+1555000000000000', 12345678]) {
      const r = await app.call('POST', '/auth/v1/otp', { body: { phone } });
      t.same([r.status, r.body], [400, { error: 'invalid phone number: E.164 required (country code and number, 7 to 15 digits)' }], String(phone));
    }
    t.equal((await verify('not a number', '123456')).status, 400);
    const bad = await app.call('POST', '/auth/v1/otp', { body: { phone: uniquePhone(), channel: 'whatsapp' } });
    t.same(bad.body, { error: 'channel must be sms' });
    const both = await app.call('POST', '/auth/v1/otp', { body: { phone: uniquePhone(), email: 'a@example.com' } });
    t.same(both.body, { error: 'invalid request body' });
  });

  t.test('no enumeration: the same answer for known and unknown numbers', async (t) => {
    const known = uniquePhone();
    await app.call('POST', '/auth/v1/otp', { body: { phone: known } });
    await storedCode(app, known);
    for (const createUser of [undefined, false]) {
      const unknown = uniquePhone();
      const a = await app.call('POST', '/auth/v1/otp', { body: { phone: known, create_user: createUser } });
      const b = await app.call('POST', '/auth/v1/otp', { body: { phone: unknown, create_user: createUser } });
      t.same([b.status, b.text, b.headers.get('content-type')], [a.status, a.text, a.headers.get('content-type')], `create_user ${String(createUser)}`);
      const [{ n }] = await app.db.sql`select count(*)::int as n from auth.users where phone = ${unknown}`;
      t.equal(n, createUser === false ? 0 : 1, createUser === false ? 'no account for an unknown number' : 'an account, as GoTrue');
    }
    const wrongKnown = await verify(known, '000000');
    const wrongUnknown = await verify(uniquePhone(), '000000');
    t.same([wrongKnown.status, wrongKnown.text], [wrongUnknown.status, wrongUnknown.text], 'a wrong code: the same for any number');
  });

  t.test('per-number limit (SMS_RATE_LIMIT_PER_HOUR), the same for unknown numbers', async (t) => {
    for (const createUser of [true, false]) {
      const phone = uniquePhone();
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await app.call('POST', '/auth/v1/otp', { body: { phone, create_user: createUser } })).status);
      t.same(statuses, [200, 200, 200, 429], `create_user ${createUser}`);
    }
  });

  t.test('five wrong codes burn it', async (t) => {
    const phone = uniquePhone();
    await app.call('POST', '/auth/v1/otp', { body: { phone } });
    const code = await storedCode(app, phone);
    const wrong = code === '000000' ? '000001' : '000000';
    for (let i = 0; i < 5; i++) await verify(phone, wrong);
    t.same((await verify(phone, code)).body, { error: 'invalid or expired token' });
  });
});

t.test('no send-SMS hook: a clear 400', async (t) => {
  const app = await startAuthApp(t, { worker: false });
  const r = await app.call('POST', '/auth/v1/otp', { body: { phone: uniquePhone() } });
  t.same([r.status, r.body], [400, { error: 'phone sign-in is disabled: no send-SMS hook is configured' }]);
});

/** A send-SMS hook over HTTP that checks the Standard Webhooks signature as a receiver would. */
async function hookServer(t: Teardown, key: Buffer) {
  const received: { phone: string; otp: string }[] = [];
  const refused: string[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(req.headers['webhook-id'] ?? '');
      const ts = String(req.headers['webhook-timestamp'] ?? '');
      const expected = createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest();
      const sigs = String(req.headers['webhook-signature'] ?? '').split(' ').map((s) => Buffer.from(s.replace(/^v1,/, ''), 'base64'));
      const fresh = Math.abs(Date.now() / 1000 - Number(ts)) < 300;
      if (!id || !fresh || !sigs.some((s) => s.length === expected.length && timingSafeEqual(s, expected))) {
        refused.push(body);
        res.writeHead(401).end();
        return;
      }
      const event = JSON.parse(body) as { user: { phone: string }; sms: { otp: string } };
      received.push({ phone: `+${event.user.phone}`, otp: event.sms.otp });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/sms`, received, refused };
}

t.test('phone sign-in through an HTTP hook signed as Standard Webhooks', async (t) => {
  const key = Buffer.from('a send-SMS hook secret of 32 bytes!');
  const hook = await hookServer(t, key);
  const app = await startAuthApp(t, {
    env: { AUTH_HOOK_SEND_SMS: hook.url, AUTH_HOOK_SEND_SMS_SECRET: `v1,whsec_${key.toString('base64')}` },
  });
  const phone = uniquePhone();
  t.equal((await app.call('POST', '/auth/v1/otp', { body: { phone } })).status, 200);
  const sms = await until('the hook to be called', async () => hook.received.find((r) => r.phone === phone));
  t.same(hook.refused, [], 'every call carried a valid signature');
  const s = await app.call('POST', '/auth/v1/verify', { body: { type: 'sms', phone, token: sms.otp } });
  t.same([s.status, s.body.user.phone], [200, phone], 'the delivered code signs in');
});

t.test('an HTTP hook with a wrong secret: refused by the receiver, nothing delivered, retried', async (t) => {
  const hook = await hookServer(t, Buffer.from('the receiver expects this secret'));
  const app = await startAuthApp(t, {
    env: { AUTH_HOOK_SEND_SMS: hook.url, AUTH_HOOK_SEND_SMS_SECRET: `v1,whsec_${Buffer.from('but plinth signs with this other one').toString('base64')}` },
  });
  t.equal((await app.call('POST', '/auth/v1/otp', { body: { phone: uniquePhone() } })).status, 200, 'the request is answered (the send is a job)');
  await until('the receiver to refuse', async () => (hook.refused.length > 0 ? true : undefined));
  t.same(hook.received, []);
});

t.test('SUPABASE_COMPAT: supabase-js signInWithOtp({phone}) and verifyOtp({type: sms})', async (t) => {
  const app = await sqlHookApp(t, { SUPABASE_COMPAT: 'true' });
  const sb = createClient(app.url, app.anonKey, { auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false } });
  const phone = uniquePhone();
  const sent = await sb.auth.signInWithOtp({ phone, options: { data: { name: 'Ada' } } });
  t.equal(sent.error, null, 'signInWithOtp');
  const token = await storedCode(app, phone);
  const v = await sb.auth.verifyOtp({ phone, token, type: 'sms' });
  t.equal(v.error, null, 'verifyOtp');
  t.equal(v.data.user?.phone, phone.slice(1), "GoTrue's phone: digits without +");
  t.type(v.data.user?.phone_confirmed_at, 'string');
  t.same(v.data.user?.app_metadata, { provider: 'phone', providers: ['phone'] });
  t.equal(v.data.user?.identities?.[0]?.provider, 'phone');
  t.equal(v.data.user?.user_metadata.name, 'Ada');
  t.type(v.data.session?.expires_at, 'number');
  t.equal(jwtPayload(v.data.session!.access_token).phone, phone);
  const again = await sb.auth.verifyOtp({ phone, token, type: 'sms' });
  t.equal(again.error?.code, 'otp_expired', 'once');
  const none = await sb.auth.signInWithOtp({ phone: uniquePhone(), options: { shouldCreateUser: false } });
  t.equal(none.error?.code, 'otp_disabled', "create_user false, unknown number: GoTrue's answer, which the setting opts into");
  const bad = await sb.auth.signInWithOtp({ phone: '0612' });
  t.equal(bad.error?.code, 'validation_failed');
});
