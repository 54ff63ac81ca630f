/**
 * One switch, both modes, the same requests (docs/api/supabase.md): without
 * SUPABASE_COMPAT every rule of the interface holds (grant_type only from the body, PATCH
 * /auth/v1/user, /otp and /verify in plinth's shapes, `{"error": …}` bodies); with it, the same requests get GoTrue's
 * and PostgREST's answers, which still carry no database text and no row's value.
 */
import t from 'tap';
import { restApp, userToken, USER_A } from '../rest/helpers.ts';
import type { TestApp } from '../helpers/app.ts';
import { PASSWORD, uniqueEmail } from './helpers.ts';
import { globToRegExp, redirectTarget } from '../../src/auth/compat/shape.ts';

const SQL = `create table public.uniq (id int primary key, name text unique not null);
grant select, insert on public.uniq to anon, authenticated;
insert into public.uniq values (1, 'Secret Name');`;

type Tap = typeof t;

async function both(t: Tap, fn: (t: Tap, app: TestApp, compat: boolean) => Promise<void>): Promise<void> {
  const plain = await restApp(t, { sql: SQL, env: { AUTH_RATE_LIMIT: '0' } });
  const compat = await restApp(t, { sql: SQL, env: { AUTH_RATE_LIMIT: '0', SUPABASE_COMPAT: 'true' } });
  await t.test('default', (t2) => fn(t2 as unknown as Tap, plain, false));
  await t.test('SUPABASE_COMPAT=true', (t2) => fn(t2 as unknown as Tap, compat, true));
}

t.test('auth: the same requests in both modes', async (t) => {
  const plain = await restApp(t, { env: { AUTH_RATE_LIMIT: '0', ALLOW_ANONYMOUS_SIGNIN: 'true' } });
  const compat = await restApp(t, { env: { AUTH_RATE_LIMIT: '0', ALLOW_ANONYMOUS_SIGNIN: 'true', SUPABASE_COMPAT: 'true' } });
  for (const [app, on] of [[plain, false], [compat, true]] as const) {
    const mode = on ? 'compat' : 'default';
    const email = uniqueEmail('modes');
    const up = await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
    t.equal(up.status, on ? 200 : 201, `${mode}: signup (GoTrue answers 200)`);
    if (on) {
      t.match(up.body.user, { aud: 'authenticated', email, app_metadata: { provider: 'email', providers: ['email'] }, is_anonymous: false }, 'GoTrue user');
      t.type(up.body.expires_at, 'number');
    } else {
      t.same(Object.keys(up.body.user).sort(), ['created_at', 'email', 'id', 'role', 'updated_at', 'user_metadata'], 'plinth user');
      t.equal(up.body.expires_at, undefined);
    }

    const q = await app.call('POST', '/auth/v1/token?grant_type=password', { body: { email, password: PASSWORD } });
    if (on) t.equal(q.status, 200, 'compat: grant_type from the query');
    else t.same([q.status, q.body], [400, { error: 'invalid request body' }], 'default: grant_type only from the body');

    const wrong = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email, password: 'not the password' } });
    if (on) t.same([wrong.status, wrong.body], [400, { code: 400, error_code: 'invalid_credentials', msg: 'Invalid login credentials' }]);
    else t.same([wrong.status, wrong.body], [401, { error: 'invalid email or password' }]);

    const put = await app.call('PUT', '/auth/v1/user', { token: up.body.access_token, body: { data: { a: 1 } } });
    // PUT is PATCH's twin in both modes (GoTrue's method, which supabase-js sends).
    t.same([put.status, put.body.user_metadata], [200, { a: 1 }], `${mode}: PUT /user`);
    const patch = await app.call('PATCH', '/auth/v1/user', { token: up.body.access_token, body: { data: { b: 2 } } });
    t.equal(patch.status, 200, `${mode}: PATCH /user`);

    // POST /otp and /verify (codes by email and phone) exist in both modes, each in its shape.
    const otp = await app.call('POST', '/auth/v1/otp', { body: { email } });
    if (on) t.same([otp.status, otp.body], [200, {}], 'compat: /otp answers {}');
    else t.same([otp.status, otp.body], [200, { message: 'if the address is registered, a sign-in link has been sent' }], 'default: /otp as /magiclink');
    const code = await app.call('POST', '/auth/v1/verify', { body: { type: 'email', email, token: '123456' } });
    if (on) t.same([code.status, code.body.error_code], [403, 'otp_expired'], 'compat: a wrong code');
    else t.same([code.status, code.body], [400, { error: 'invalid or expired token' }], 'default: a wrong code');

    const guest = await app.call('POST', '/auth/v1/signup', { body: { data: {} } });
    if (on) t.same([guest.status, guest.body.user.is_anonymous], [200, true], 'compat: signup without an address is a guest');
    else t.same([guest.status, guest.body], [400, { error: 'invalid request body' }], 'default: signup needs an address');

    const noToken = await app.call('GET', '/auth/v1/user', { token: 'not.a.jwt' });
    if (on) t.same([noToken.status, noToken.body.error_code], [403, 'bad_jwt']);
    else t.same([noToken.status, noToken.body], [401, { error: 'invalid or expired token' }]);

    const link = await app.call('GET', '/auth/v1/verify?token=unknown&type=magiclink&redirect_to=https://evil.example/');
    if (on) t.same([link.status, link.body.error_code], [400, 'validation_failed'], 'compat: a foreign redirect_to is refused');
    else t.same([link.status, link.body], [400, { error: 'invalid or expired token' }], 'default: type and redirect_to are not read');
  }
});

t.test('REST errors: the same requests in both modes', async (t) => {
  await both(t as unknown as Tap, async (t, app, on) => {
    const user = await userToken(USER_A);
    const cases: [string, string, { token?: string; body?: unknown; headers?: Record<string, string> }, number, string][] = [
      ['GET', '/rest/v1/uniq?id=eq.99', { headers: { accept: 'application/vnd.pgrst.object+json' } }, 406, 'PGRST116'],
      ['POST', '/rest/v1/uniq', { token: user, body: { id: 2, name: 'Secret Name' } }, 409, '23505'],
      ['GET', '/rest/v1/secrets', { token: user }, 403, '42501'],
      ['POST', '/rest/v1/uniq', { token: user, body: { id: 3, nope: 1 } }, 400, 'PGRST204'],
      ['GET', '/rest/v1/uniq?select=nope', {}, 400, '42703'],
      ['GET', '/rest/v1/no_such_table', {}, 404, 'PGRST205'],
      ['POST', '/rest/v1/rpc/no_such_function', { body: {} }, 404, 'PGRST202'],
      ['GET', '/rest/v1/uniq?id=zz.1', {}, 400, 'PGRST100'],
      ['POST', '/rest/v1/notes', { token: user, body: { body: 'x', owner: '00000000-0000-4000-8000-0000000000bb' } }, 403, '42501'],
    ];
    for (const [method, path, opts, status, code] of cases) {
      const r = await app.call(method, path, { apikey: app.anonKey, ...opts });
      t.equal(r.status, status, `${method} ${path}: ${status}`);
      t.notMatch(r.text, /Secret Name|Key \(|unique constraint "|insert into|select /i, 'no row value and no SQL text');
      if (on) {
        t.same(Object.keys(r.body).sort(), ['code', 'details', 'hint', 'message'], 'PostgREST shape');
        t.equal(r.body.code, code, `${method} ${path}: ${code}`);
        t.equal(r.body.hint, null);
      } else {
        t.same(Object.keys(r.body), ['error'], "plinth's shape");
      }
    }
    // A success is the same in both modes.
    const ok = await app.call('GET', '/rest/v1/uniq?select=id,name', { apikey: app.anonKey });
    t.same([ok.status, ok.body], [200, [{ id: 1, name: 'Secret Name' }]]);
  });
});

t.test('redirect_to: SITE_URL, its origin, ADDITIONAL_REDIRECT_URLS globs; anything else refused', async (t) => {
  const config = { siteUrl: 'https://app.example', additionalRedirectUrls: ['http://localhost:3000/**', 'https://*.preview.example/auth', 'myapp://callback'] };
  t.equal(redirectTarget(config, undefined), 'https://app.example');
  t.equal(redirectTarget(config, 'https://app.example/welcome?x=1'), 'https://app.example/welcome?x=1');
  t.equal(redirectTarget(config, 'http://localhost:3000/a/b'), 'http://localhost:3000/a/b');
  t.equal(redirectTarget(config, 'https://pr-1.preview.example/auth'), 'https://pr-1.preview.example/auth');
  t.equal(redirectTarget(config, 'myapp://callback'), 'myapp://callback');
  for (const bad of ['https://evil.example/', 'https://app.example.evil.example/', 'https://a.b.preview.example/auth', 'http://localhost:3001/', 'javascript:alert(1)', 'not a url']) {
    let status = 0;
    try {
      redirectTarget(config, bad);
    } catch (err) {
      status = (err as { status: number }).status;
    }
    t.equal(status, 400, `refused: ${bad}`);
  }
  t.ok(globToRegExp('https://*.x.com').test('https://a.x.com'));
  t.notOk(globToRegExp('https://*.x.com').test('https://a.b.x.com'), '* stays within a label');
});
