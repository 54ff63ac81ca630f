/**
 * AUTH_RATE_LIMIT (interface §8, contract §3): per client IP in any 60-second window,
 * summed over signup, token, recover and magiclink; a 429 is not counted; it holds across
 * two instances sharing one database; TRUST_PROXY=true picks the left-most X-Forwarded-For,
 * a proxy count or the proxies' addresses the right-most hop that is not a proxy, so a
 * client behind a real proxy cannot buy new budgets by rotating the header; 0 disables.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { sendFrom, startForwardingProxy } from '../helpers/forwarding-proxy.ts';
import { PASSWORD, uniqueEmail } from './helpers.ts';

const LIMITED = { error: 'too many requests, try again later' };

t.test('summed over signup, token, recover and magiclink; 429 not counted', async (t) => {
  const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '4' } });
  const email = uniqueEmail('rl');
  const statuses = [
    (await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } })).status,
    (await app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email, password: PASSWORD } })).status,
    (await app.call('POST', '/auth/v1/recover', { body: { email } })).status,
    (await app.call('POST', '/auth/v1/magiclink', { body: { email } })).status,
  ];
  t.same(statuses, [201, 200, 200, 200], 'four requests pass');
  for (const [path, body] of [
    ['/auth/v1/signup', { email: uniqueEmail(), password: PASSWORD }],
    ['/auth/v1/token', { grant_type: 'refresh_token', refresh_token: 'x' }],
    ['/auth/v1/recover', { email }],
    ['/auth/v1/magiclink', { email }],
  ] as const) {
    const r = await app.call('POST', path, { body });
    t.equal(r.status, 429, path);
    t.same(r.body, LIMITED, path);
  }
  const [{ hits }] = await app.db.sql`select cardinality(hits) as hits from auth_private.rate_limits where bucket = 'auth'`;
  t.equal(hits, 4, '429 answers were not counted');

  // Other endpoints are not limited.
  t.equal((await app.call('GET', '/auth/v1/verify?token=x')).status, 400);
  t.equal((await app.call('POST', '/auth/v1/recover/confirm', { body: { token: 'x', password: PASSWORD } })).status, 400);

  // The window slides: 50 seconds later still limited, past 60 seconds free again.
  await app.db.sql`update auth_private.rate_limits set hits = array(select h - interval '50 seconds' from unnest(hits) h)`;
  t.equal((await app.call('POST', '/auth/v1/recover', { body: { email } })).status, 429, 'within the minute');
  await app.db.sql`update auth_private.rate_limits set hits = array(select h - interval '11 seconds' from unnest(hits) h)`;
  t.equal((await app.call('POST', '/auth/v1/recover', { body: { email } })).status, 200, 'after the minute');
});

t.test('invalid requests count too (the limit is on requests, not on successes)', async (t) => {
  const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '2' } });
  t.equal((await app.call('POST', '/auth/v1/signup', { body: {} })).status, 400);
  t.equal((await app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email: 'x@example.com', password: 'wrong pass' } })).status, 401);
  const r = await app.call('POST', '/auth/v1/signup', { body: { email: uniqueEmail(), password: PASSWORD } });
  t.equal(r.status, 429);
  t.same(r.body, LIMITED);
});

t.test('one limit across two instances sharing the database', async (t) => {
  const db = await createTestDatabase(t);
  const a = await startApp(t, { db, worker: false, env: { AUTH_RATE_LIMIT: '5' } });
  const b = await startApp(t, { db, worker: false, env: { AUTH_RATE_LIMIT: '5' } });
  const call = (app: typeof a) => app.call('POST', '/auth/v1/recover', { body: { email: 'someone@example.com' } });
  // Concurrently, half on each instance: exactly five pass.
  const results = await Promise.all(Array.from({ length: 10 }, (_, i) => call(i % 2 === 0 ? a : b)));
  t.equal(results.filter((r) => r.status === 200).length, 5, 'five pass in all');
  t.equal(results.filter((r) => r.status === 429).length, 5, 'the rest are refused');
  t.equal((await call(a)).status, 429);
  t.equal((await call(b)).status, 429);
});

t.test('TRUST_PROXY=true: the left-most X-Forwarded-For entry is the client', async (t) => {
  const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '1', TRUST_PROXY: 'true' } });
  const from = (xff: string) => app.call('POST', '/auth/v1/recover', { body: { email: 'p@example.com' }, headers: { 'x-forwarded-for': xff } });
  t.equal((await from('203.0.113.7, 10.0.0.1')).status, 200);
  t.equal((await from('203.0.113.7, 10.0.0.2')).status, 429, 'same client behind another hop');
  t.equal((await from('203.0.113.8, 10.0.0.1')).status, 200, 'another client');
  const rows = await app.db.sql`select ip from auth_private.rate_limits order by ip`;
  t.same(rows.map((r) => r.ip), ['203.0.113.7', '203.0.113.8']);
});

/** Eight password guesses, each with another X-Forwarded-For, from `local` to `base`. */
async function rotatingGuesses(local: string, base: string, email: string): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 1; i <= 8; i++) {
    const r = await sendFrom(local, base, 'POST', '/auth/v1/token', { grant_type: 'password', email, password: `guess number ${i}` }, {
      'x-forwarded-for': `198.51.100.${i}`,
    });
    statuses.push(r.status);
  }
  return statuses;
}

const FIVE_THEN_LIMITED = (statuses: number[]) => statuses.slice(0, 5).every((s) => s !== 429) && statuses.slice(5).every((s) => s === 429);

t.test('TRUST_PROXY=1 behind a real proxy: rotating X-Forwarded-For meets 429', async (t) => {
  const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '5', TRUST_PROXY: '1' } });
  const proxy = await startForwardingProxy(t, app.url);
  const statuses = await rotatingGuesses('127.0.0.2', proxy.url, uniqueEmail('victim'));
  t.ok(FIVE_THEN_LIMITED(statuses), `five guesses, then 429 (${statuses.join(' ')})`);
  const rows = await app.db.sql`select ip from auth_private.rate_limits`;
  t.same(rows.map((r) => r.ip), ['127.0.0.2'], 'keyed on the address the proxy saw, not on what the client wrote');
});

t.test('TRUST_PROXY=2 behind two proxies: the hop in front of the first proxy is the client', async (t) => {
  const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '5', TRUST_PROXY: '2' } });
  const inner = await startForwardingProxy(t, app.url);
  const outer = await startForwardingProxy(t, inner.url, { localAddress: '127.0.0.5' });
  const statuses = await rotatingGuesses('127.0.0.4', outer.url, uniqueEmail('victim'));
  t.ok(FIVE_THEN_LIMITED(statuses), `five guesses, then 429 (${statuses.join(' ')})`);
  const rows = await app.db.sql`select ip from auth_private.rate_limits`;
  t.same(rows.map((r) => r.ip), ['127.0.0.4']);
});

t.test('TRUST_PROXY=<proxy addresses>: through the proxy and around it, rotating headers meet 429', async (t) => {
  const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '5', TRUST_PROXY: '127.0.0.1, 10.0.0.0/8' } });
  const proxy = await startForwardingProxy(t, app.url);
  const email = uniqueEmail('victim');
  const viaProxy = await rotatingGuesses('127.0.0.2', proxy.url, email);
  t.ok(FIVE_THEN_LIMITED(viaProxy), `through the proxy: five, then 429 (${viaProxy.join(' ')})`);
  // A client that reaches plinth itself, from an address that is not a proxy: its header is not read.
  const direct = await rotatingGuesses('127.0.0.3', app.url, email);
  t.ok(FIVE_THEN_LIMITED(direct), `around the proxy: five, then 429 (${direct.join(' ')})`);
  const rows = await app.db.sql`select ip from auth_private.rate_limits order by ip`;
  t.same(rows.map((r) => r.ip), ['127.0.0.2', '127.0.0.3']);
});

t.test('TRUST_PROXY=true (legacy): the left-most entry counts, so a client that writes it picks its budget', async (t) => {
  const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '5', TRUST_PROXY: 'true' } });
  const proxy = await startForwardingProxy(t, app.url);
  const statuses = await rotatingGuesses('127.0.0.2', proxy.url, uniqueEmail('victim'));
  t.notOk(statuses.includes(429), `no 429: the reason a count or the proxies' addresses are safer (${statuses.join(' ')})`);
  const [{ n }] = await app.db.sql`select count(*)::int as n from auth_private.rate_limits`;
  t.equal(n, 8, 'one budget per forged address');
});

t.test('TRUST_PROXY=false (default): X-Forwarded-For is ignored', async (t) => {
  const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '1' } });
  const from = (xff: string) => app.call('POST', '/auth/v1/recover', { body: { email: 'p@example.com' }, headers: { 'x-forwarded-for': xff } });
  t.equal((await from('203.0.113.7')).status, 200);
  const r = await from('203.0.113.99');
  t.equal(r.status, 429, 'a spoofed header does not buy a new budget');
  t.same(r.body, LIMITED);
  const rows = await app.db.sql`select ip from auth_private.rate_limits`;
  t.match(rows[0].ip, /127\.0\.0\.1/, 'the socket address counts');
});

t.test('AUTH_RATE_LIMIT=0 disables the limit', async (t) => {
  const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '0' } });
  const results = await Promise.all(Array.from({ length: 40 }, () => app.call('POST', '/auth/v1/recover', { body: { email: 'z@example.com' } })));
  t.ok(results.every((r) => r.status === 200));
  const [{ n }] = await app.db.sql`select count(*)::int as n from auth_private.rate_limits`;
  t.equal(n, 0, 'nothing counted');
});

t.test('default AUTH_RATE_LIMIT is 30 per minute', async (t) => {
  const app = await startApp(t, { worker: false });
  t.equal(app.config.authRateLimit, 30);
  const results = [];
  for (let i = 0; i < 31; i++) results.push((await app.call('POST', '/auth/v1/recover', { body: { email: 'd@example.com' } })).status);
  t.same(results.slice(0, 30), Array(30).fill(200));
  t.equal(results[30], 429);
});

t.test('SUPABASE_COMPAT anonymous sign-in behind a real proxy (TRUST_PROXY=1): keyed on each client, not on the proxy', async (t) => {
  const app = await startApp(t, {
    worker: false,
    env: { SUPABASE_COMPAT: 'true', ALLOW_ANONYMOUS_SIGNIN: 'true', ANONYMOUS_RATE_LIMIT: '1', TRUST_PROXY: '1' },
  });
  const proxy = await startForwardingProxy(t, app.url);
  const signIn = (local: string) => sendFrom(local, proxy.url, 'POST', '/auth/v1/signup', {}, { apikey: app.anonKey, 'x-forwarded-for': '198.51.100.9' });
  const a = [(await signIn('127.0.0.2')).status, (await signIn('127.0.0.2')).status];
  const b = (await signIn('127.0.0.3')).status;
  t.same(a, [200, 429], 'one client: its one sign-in, then 429');
  t.equal(b, 200, 'another client behind the same proxy has its own budget');
  const rows = await app.db.sql`select ip from auth_private.rate_limits where bucket = 'anonymous' order by ip`;
  t.same(rows.map((r) => r.ip), ['127.0.0.2', '127.0.0.3'], 'keyed on the addresses the proxy saw, never on the proxy (127.0.0.1)');
});
