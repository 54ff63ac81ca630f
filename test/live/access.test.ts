/**
 * Who may open /ws/{query_id} and read /ws/_presence/{channel} (interface §4.9 rules 1–3,
 * §7.3; contract §3, §5): every refusal is an HTTP response before the upgrade with an
 * `{error}` body, in every configuration the rules name.
 */
import t from 'tap';
import { SignJWT } from 'jose';
import { startApp, TEST_JWT_SECRET, type TestApp } from '../helpers/app.ts';
import { startProxy } from '../helpers/proxy.ts';
import { open, refused } from './helpers.ts';

const KEY = new TextEncoder().encode(TEST_JWT_SECRET);

function sign(claims: Record<string, unknown>, expiresIn = '1h', secret = KEY): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt().setExpirationTime(expiresIn).sign(secret);
}

const user = (extra: Record<string, unknown> = {}) =>
  sign({ sub: '6f1c1c2e-0d5e-4c43-9a53-2d3a1d3c9f01', role: 'authenticated', aud: 'authenticated', ...extra });

async function fixtures(app: TestApp): Promise<void> {
  await app.db.sql.unsafe(`create table public.notes (id int primary key, body text);
    select live.subscribe('notes', 'select id, body from notes');
    select live.subscribe('team_notes', 'select id from notes', 'delta', '{"app_metadata": {"team": "red"}}');`);
}

async function accepted(t: any, app: TestApp, path: string, opts: Parameters<typeof open>[2], what: string) {
  const c = await open(app, path, opts);
  t.equal((await c.next()).type, 'subscribed', what);
  c.ws.terminate();
}

t.test('credentials with JWT_SECRET set', async (t) => {
  const app = await startApp(t);
  await fixtures(app);
  t.same(await refused(app, '/ws/notes'), { status: 401, body: { error: 'missing credentials' } }, 'no credential: 401');
  t.same(await refused(app, '/ws/nope'), { status: 401, body: { error: 'missing credentials' } }, 'no credential on an unknown id: still 401');
  const bad = { status: 401, body: { error: 'invalid or expired token' } };
  t.same(await refused(app, '/ws/notes', { query: { token: 'not-a-jwt' } }), bad, 'a malformed ?token=');
  t.same(await refused(app, '/ws/notes', { query: { token: await user({}).then(() => sign({ role: 'authenticated', sub: 'x' }, '1h', new TextEncoder().encode('x'.repeat(40)))) } }), bad, 'a token signed with another secret');
  t.same(await refused(app, '/ws/notes', { query: { token: await sign({ role: 'authenticated', sub: 'x' }, '-10s') } }), bad, 'an expired token');
  t.same(await refused(app, '/ws/notes', { headers: { authorization: 'Bearer nope' } }), bad, 'a bad Authorization: Bearer');
  t.same(await refused(app, '/ws/notes', { query: { apikey: await user() } }), bad, 'a user token is not an apikey');
  t.same(await refused(app, '/ws/notes', { headers: { cookie: 'token=nope' } }), bad, 'a bad token cookie');
  t.same(await refused(app, '/ws/nope', { query: { apikey: app.anonKey } }), { status: 404, body: { error: 'subscription not found' } }, 'unknown subscription: 404');

  await accepted(t, app, '/ws/notes', { query: { token: app.anonKey } }, 'the anon key as ?token=');
  await accepted(t, app, '/ws/notes', { query: { apikey: app.anonKey } }, 'the anon key as ?apikey=');
  await accepted(t, app, '/ws/notes', { headers: { apikey: app.anonKey } }, 'the anon key as apikey header');
  await accepted(t, app, '/ws/notes', { headers: { authorization: `Bearer ${await user()}` } }, 'a user JWT as Authorization: Bearer');
  await accepted(t, app, '/ws/notes', { query: { token: await user() } }, 'a user JWT as ?token=');
  await accepted(t, app, '/ws/notes', { headers: { cookie: `token=${await user()}` } }, 'a user JWT as token cookie');
  await accepted(t, app, '/ws/notes', { query: { apikey: app.serviceKey } }, 'the service-role key');

  t.same((await app.call('GET', '/ws/_presence/notes')).body, { error: 'missing credentials' }, 'presence without credential: 401 body');
  t.equal((await app.call('GET', '/ws/_presence/notes')).status, 401, 'presence without credential: 401');
  t.equal((await app.call('GET', '/ws/_presence/notes?token=nope')).status, 401, 'presence with a bad token: 401');
  const p = await app.call('GET', `/ws/_presence/notes?apikey=${app.anonKey}`);
  t.same([p.status, p.body], [200, {}], 'presence with the anon key');
  const adhoc = await app.call('GET', `/ws/_presence/lobby?apikey=${app.anonKey}`);
  t.same([adhoc.status, adhoc.body], [200, {}], 'an ad-hoc channel is public');
  const plain = await app.call('GET', `/ws/notes?apikey=${app.anonKey}`);
  t.same([plain.status, plain.body], [426, { error: 'upgrade required' }], 'a plain GET is not an upgrade');
});

t.test('audience-bound subscriptions', async (t) => {
  const app = await startApp(t);
  await fixtures(app);
  const need = { status: 401, body: { error: 'authentication required' } };
  const aud = { status: 403, body: { error: 'audience not satisfied' } };
  t.same(await refused(app, '/ws/team_notes', { query: { apikey: app.anonKey } }), need, 'anon is refused');
  t.same(await refused(app, '/ws/team_notes', { query: { token: await user() } }), aud, 'claims without the audience: 403');
  t.same(await refused(app, '/ws/team_notes', { query: { token: await user({ app_metadata: { team: 'blue' } }) } }), aud, 'claims with another value: 403');
  await accepted(t, app, '/ws/team_notes', { query: { token: await user({ app_metadata: { team: 'red', x: 1 } }) } }, 'claims @> audience');
  const pAnon = await app.call('GET', `/ws/_presence/team_notes?apikey=${app.anonKey}`);
  t.same([pAnon.status, pAnon.body], [401, { error: 'authentication required' }], 'presence: anon refused on a bound channel');
  const pBad = await app.call('GET', `/ws/_presence/team_notes?token=${await user()}`);
  t.same([pBad.status, pBad.body], [403, { error: 'audience not satisfied' }], 'presence: failing claims refused');
  const pOk = await app.call('GET', `/ws/_presence/team_notes`, { token: await user({ app_metadata: { team: 'red' } }) });
  t.equal(pOk.status, 200, 'presence: claims @> audience');
});

t.test('REQUIRE_AUTHENTICATED_WS=true', async (t) => {
  const app = await startApp(t, { env: { REQUIRE_AUTHENTICATED_WS: 'true' } });
  await fixtures(app);
  const need = { status: 401, body: { error: 'authentication required' } };
  t.same(await refused(app, '/ws/notes', { query: { apikey: app.anonKey } }), need, 'the anon key is refused');
  t.same(await refused(app, '/ws/notes', { query: { token: app.anonKey } }), need, 'also as ?token=');
  await accepted(t, app, '/ws/notes', { query: { token: await user() } }, 'a user JWT');
  await accepted(t, app, '/ws/notes', { query: { token: app.serviceKey } }, 'the service-role key');
  const p = await app.call('GET', `/ws/_presence/lobby?apikey=${app.anonKey}`);
  t.same([p.status, p.body], [401, need.body], 'presence: anon refused even on an ad-hoc channel');
});

t.test('development mode (no JWT_SECRET): no credential passes as anon', async (t) => {
  const app = await startApp(t, { env: { JWT_SECRET: undefined } });
  await fixtures(app);
  await accepted(t, app, '/ws/notes', {}, 'no credential');
  t.same(await refused(app, '/ws/team_notes'), { status: 401, body: { error: 'authentication required' } }, 'but not on an audience-bound subscription');
  t.equal((await app.call('GET', '/ws/_presence/notes')).status, 200, 'presence without credential');
});

t.test('Origin (rule 2, contract §5 same-origin)', async (t) => {
  const app = await startApp(t, { env: { ALLOWED_ORIGINS: 'https://app.example.com', API_EXTERNAL_URL: 'https://api.example.com' } });
  await fixtures(app);
  const key = { apikey: app.anonKey };
  const no = { status: 403, body: { error: 'origin not allowed' } };
  t.same(await refused(app, '/ws/notes', { query: key, headers: { origin: 'https://evil.example.com' } }), no, 'a foreign Origin');
  await accepted(t, app, '/ws/notes', { query: key, headers: { origin: 'http://localhost:3000' } }, "SITE_URL's origin: allowed for WebSockets as for REST");
  t.equal((await app.call('GET', `/ws/_presence/notes?apikey=${app.anonKey}`, { headers: { origin: 'https://evil.example.com' } })).status, 403, 'presence too');
  await accepted(t, app, '/ws/notes', { query: key }, 'no Origin (not a browser)');
  await accepted(t, app, '/ws/notes', { query: key, headers: { origin: 'https://app.example.com' } }, 'a listed origin');
  await accepted(t, app, '/ws/notes', { query: key, headers: { origin: 'https://api.example.com' } }, "API_EXTERNAL_URL's origin");
  const host = new URL(app.url).host;
  await accepted(t, app, '/ws/notes', { query: key, headers: { origin: `http://${host}` } }, 'http://<Host header>');

  const empty = await startApp(t, { db: app.db });
  t.same(await refused(empty, '/ws/notes', { query: { apikey: empty.anonKey }, headers: { origin: 'https://app.example.com' } }), no, 'empty list: only same-origin');
  await accepted(t, empty, '/ws/notes', { query: { apikey: empty.anonKey }, headers: { origin: `http://${new URL(empty.url).host}` } }, 'empty list: same-origin passes');

  const permissive = await startApp(t, { db: app.db, env: { ALLOW_PERMISSIVE_CORS: 'true' } });
  await accepted(t, permissive, '/ws/notes', { query: { apikey: permissive.anonKey }, headers: { origin: 'https://evil.example.com' } }, 'ALLOW_PERMISSIVE_CORS=true: any origin');
});

t.test('connection caps: 429 per IP, 503 in all', async (t) => {
  const app = await startApp(t, { env: { WS_MAX_CONNECTIONS_PER_IP: '2', WS_MAX_CONNECTIONS: '3' } });
  await fixtures(app);
  const q = { query: { apikey: app.anonKey } };
  const a = await open(app, '/ws/notes', q);
  const b = await open(app, '/ws/notes', q);
  t.same(await refused(app, '/ws/notes', q), { status: 429, body: { error: 'too many connections from this address' } }, 'third from one IP: 429');
  a.ws.terminate();
  await a.closed;
  const a2 = await new Promise<Awaited<ReturnType<typeof open>>>((resolve, reject) => {
    const end = Date.now() + 5000;
    const attempt = (): void => {
      open(app, '/ws/notes', q).then(resolve, (err: Error) => {
        if (Date.now() > end) reject(err);
        else setTimeout(attempt, 50);
      });
    };
    attempt();
  });
  t.ok(a2, 'a closed connection frees its place');

  const viaProxyHeader = await startApp(t, { db: app.db, env: { WS_MAX_CONNECTIONS_PER_IP: '5', WS_MAX_CONNECTIONS: '2', TRUST_PROXY: 'true' } });
  const h = (ip: string) => ({ query: { apikey: app.anonKey }, headers: { 'x-forwarded-for': ip } });
  const c1 = await open(viaProxyHeader, '/ws/notes', h('10.0.0.1'));
  const c2 = await open(viaProxyHeader, '/ws/notes', h('10.0.0.2'));
  t.same(await refused(viaProxyHeader, '/ws/notes', h('10.0.0.3')), { status: 503, body: { error: 'connection limit reached' } }, 'past WS_MAX_CONNECTIONS: 503');
  for (const c of [b, a2, c1, c2]) c.ws.terminate();
});

t.test('503 when the registry cannot be read', async (t) => {
  const app0 = await startApp(t);
  await fixtures(app0);
  const u = new URL(app0.db.url);
  const proxy = await startProxy(u.hostname, Number(u.port));
  t.teardown(() => proxy.close());
  u.port = String(proxy.port);
  const app = await startApp(t, { db: app0.db, databaseUrl: u.toString() });
  await accepted(t, app, '/ws/notes', { query: { apikey: app.anonKey } }, 'reachable: accepted');
  proxy.cut();
  t.same(await refused(app, '/ws/notes', { query: { apikey: app.anonKey } }), { status: 503, body: { error: 'subscription metadata unavailable' } }, 'database away: 503');
  const p = await app.call('GET', `/ws/_presence/notes?apikey=${app.anonKey}`);
  t.same([p.status, p.body], [503, { error: 'subscription metadata unavailable' }], 'presence: 503');
  proxy.restore();
});
