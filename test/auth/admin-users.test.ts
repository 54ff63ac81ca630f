/**
 * Admins manage users (service role), in GoTrue's shapes: GET and PUT
 * /auth/v1/admin/users/{id} (email, password, metadata, role, email_confirm, ban_duration),
 * a banned user signing in and refreshing no more, app_metadata in every token and in an
 * RLS policy through auth.jwt(), invite (with the real SMTP receiver) and generate_link.
 */
import t from 'tap';
import { createTestDatabase } from '../helpers/database.ts';
import { jwtPayload, linksOf, PASSWORD, refresh, signIn, signUp, startAuthApp, startSmtp, tokenOfLink, uniqueEmail } from './helpers.ts';

const db = await createTestDatabase(t);
await db.sql.unsafe(`
  create table public.pro_notes (id int primary key, body text);
  alter table public.pro_notes enable row level security;
  create policy pro_only on public.pro_notes for select to authenticated using (auth.jwt() -> 'app_metadata' ->> 'plan' = 'pro');
  grant select on public.pro_notes to authenticated;
  insert into public.pro_notes values (1, 'for pro members');
`);
const smtp = await startSmtp(t);
const app = await startAuthApp(t, {
  db,
  env: { AUTH_RATE_LIMIT: '0', ALLOW_ANONYMOUS_SIGNIN: 'true', SMTP_URL: smtp.url, SITE_URL: 'https://app.plinth.test', API_EXTERNAL_URL: 'https://api.plinth.test' },
});
const svc = { token: app.serviceKey };

t.test('GET and PUT a user: metadata merged, role, email, password, confirmation', async (t) => {
  const email = uniqueEmail('adm');
  const s = await signUp(app, email, PASSWORD, { name: 'Ann', drop: 1 });
  const id = s.session.user.id;
  const got = await app.call('GET', `/auth/v1/admin/users/${id}`, svc);
  t.equal(got.status, 200);
  t.same(got.body.app_metadata, { provider: 'email', providers: ['email'] }, 'provider and providers');
  t.equal(got.body.banned_until, null);
  const put = await app.call('PUT', `/auth/v1/admin/users/${id}`, {
    ...svc,
    body: { user_metadata: { drop: null, age: 3 }, app_metadata: { plan: 'pro' }, role: 'service_role', email_confirm: true },
  });
  t.equal(put.status, 200);
  t.same(put.body.user_metadata, { name: 'Ann', age: 3 }, 'user_metadata merged, a null key removed');
  t.same(put.body.app_metadata, { plan: 'pro', provider: 'email', providers: ['email'] });
  t.equal(put.body.role, 'service_role');
  t.type(put.body.email_confirmed_at, 'string');
  t.same((await app.call('GET', `/auth/v1/admin/users/${id}`, svc)).body, put.body, 'GET answers what PUT stored');

  const moved = uniqueEmail('moved');
  const change = await app.call('PUT', `/auth/v1/admin/users/${id}`, { ...svc, body: { email: moved.toUpperCase(), password: 'a new password 1' } });
  t.equal(change.body.email, moved, 'email lower-cased');
  t.equal((await signIn(app, moved, 'a new password 1')).status, 200, 'the new email and password sign in');
  t.equal((await signIn(app, moved, PASSWORD)).status, 401, 'the old password does not');
  const taken = await app.call('PUT', `/auth/v1/admin/users/${id}`, { ...svc, body: { email: (await signUp(app)).session.user.email } });
  t.same([taken.status, taken.body], [409, { error: 'email already registered' }]);
});

t.test('bad requests', async (t) => {
  const id = (await signUp(app)).session.user.id;
  const cases: [string, string, unknown, number, string][] = [
    ['PUT', `/auth/v1/admin/users/${id}`, { ban_duration: '24 hours' }, 400, 'invalid ban_duration'],
    ['PUT', `/auth/v1/admin/users/${id}`, { app_metadata: [1] }, 400, 'invalid request body'],
    ['PUT', `/auth/v1/admin/users/${id}`, { role: 'postgres' }, 400, 'invalid request body'],
    ['PUT', `/auth/v1/admin/users/${id}`, { password: 'short' }, 400, 'password must be at least 8 characters'],
    ['PUT', '/auth/v1/admin/users/nope', {}, 400, 'invalid user id'],
    ['GET', '/auth/v1/admin/users/00000000-0000-4000-8000-000000000000', undefined, 404, 'user not found'],
    ['PUT', '/auth/v1/admin/users/00000000-0000-4000-8000-000000000000', {}, 404, 'user not found'],
    ['POST', '/auth/v1/admin/generate_link', { type: 'email_change_new', email: uniqueEmail() }, 400, 'invalid link type'],
    ['POST', '/auth/v1/admin/generate_link', { type: 'recovery', email: uniqueEmail() }, 404, 'user not found'],
    ['POST', '/auth/v1/invite', { email: 'not an address' }, 400, 'invalid email address'],
  ];
  for (const [method, path, body, status, error] of cases) {
    const r = await app.call(method, path, { ...svc, body: method === 'GET' ? undefined : body });
    t.same([r.status, r.body], [status, { error }], `${method} ${path} ${JSON.stringify(body)}`);
  }
  const user = (await signUp(app)).session;
  for (const [method, path] of [['GET', `/auth/v1/admin/users/${id}`], ['PUT', `/auth/v1/admin/users/${id}`], ['POST', '/auth/v1/invite'], ['POST', '/auth/v1/admin/generate_link']]) {
    const r = await app.call(method, path, { token: user.access_token, body: method === 'GET' ? undefined : { email: uniqueEmail(), type: 'invite' } });
    t.same([r.status, r.body], [403, { error: 'service role required' }], `${method} ${path} is the service role's`);
  }
});

t.test('a banned user signs in and refreshes no more; "none" lifts the ban', async (t) => {
  const email = uniqueEmail('ban');
  const s = await signUp(app, email);
  const ban = await app.call('PUT', `/auth/v1/admin/users/${s.session.user.id}`, { ...svc, body: { ban_duration: '24h' } });
  t.equal(ban.status, 200);
  const until = Date.parse(ban.body.banned_until as string);
  t.ok(until > Date.now() + 23 * 3600_000 && until < Date.now() + 25 * 3600_000, 'banned for 24 hours');
  const signin = await signIn(app, email);
  t.same([signin.status, signin.body], [403, { error: 'user is banned' }], 'no sign-in');
  const wrong = await signIn(app, email, 'not the password');
  t.same([wrong.status, wrong.body], [401, { error: 'invalid email or password' }], 'a wrong password tells nothing of the ban');
  const r = await refresh(app, s.session.refresh_token);
  t.same([r.status, r.body], [403, { error: 'user is banned' }], 'no refresh');
  const ml = await app.call('POST', '/auth/v1/magiclink', { body: { email } });
  t.equal(ml.status, 200);
  const link = new URL(linksOf((await smtp.next(email)).text)[0]);
  const v = await app.call('GET', link.pathname + link.search);
  t.same([v.status, v.body], [403, { error: 'user is banned' }], 'no magic link sign-in');
  const lift = await app.call('PUT', `/auth/v1/admin/users/${s.session.user.id}`, { ...svc, body: { ban_duration: 'none' } });
  t.equal(lift.body.banned_until, null);
  t.equal((await refresh(app, s.session.refresh_token)).status, 200, 'the refresh token works again');
  t.equal((await signIn(app, email)).status, 200, 'and the password');
});

t.test('app_metadata is in every token and in RLS policies through auth.jwt()', async (t) => {
  const email = uniqueEmail('pro');
  const s = await signUp(app, email);
  t.same(jwtPayload(s.session.access_token).app_metadata, { provider: 'email', providers: ['email'] }, 'at sign-up');
  const notes = async (token: string) => (await app.call('GET', '/rest/v1/pro_notes?select=body', { token })).body as unknown;
  t.same(await notes(s.session.access_token), [], 'the policy hides the row');
  await app.call('PUT', `/auth/v1/admin/users/${s.session.user.id}`, { ...svc, body: { app_metadata: { plan: 'pro', provider: 'forged' } } });
  const p = await signIn(app, email);
  t.same(jwtPayload(p.body.access_token as string).app_metadata, { plan: 'pro', provider: 'email', providers: ['email'] },
    'password sign-in; provider stays plinth\'s');
  t.same(await notes(p.body.access_token as string), [{ body: 'for pro members' }], 'the policy reads auth.jwt() -> app_metadata');
  const r = await refresh(app, s.session.refresh_token);
  t.same(jwtPayload(r.body.access_token as string).app_metadata, { plan: 'pro', provider: 'email', providers: ['email'] }, 'refresh');
  const anon = await app.call('POST', '/auth/v1/anonymous');
  t.same(jwtPayload(anon.body.access_token as string).app_metadata, { provider: 'anonymous', providers: ['anonymous'] }, 'guests');
});

t.test('invite: the user, an email whose link signs in once and confirms', async (t) => {
  const email = uniqueEmail('inv');
  const r = await app.call('POST', '/auth/v1/invite', { ...svc, body: { email, data: { team: 'red' } } });
  t.equal(r.status, 200);
  t.equal(r.body.email, email);
  t.type(r.body.invited_at, 'string');
  t.equal(r.body.email_confirmed_at, null);
  const mail = await smtp.next(email);
  t.match(mail.subject, /invited/);
  const links = linksOf(mail.text);
  t.equal(links.length, 1);
  const u = new URL(links[0]);
  t.equal(u.origin + u.pathname, 'https://api.plinth.test/auth/v1/magiclink/verify');
  const v = await app.call('GET', u.pathname + u.search);
  t.equal(v.status, 302);
  const at = new URLSearchParams(new URL(v.headers.get('location')!).hash.slice(1)).get('access_token')!;
  t.equal(jwtPayload(at).sub, r.body.id, 'signed in as the invitee');
  const me = await app.call('GET', '/auth/v1/user', { token: at });
  t.same(me.body.user_metadata, { team: 'red' }, 'the invitation\'s data stays');
  t.equal((await app.call('GET', u.pathname + u.search)).status, 400, 'once');
  t.type((await app.call('GET', `/auth/v1/admin/users/${r.body.id}`, svc)).body.email_confirmed_at, 'string', 'confirmed');
  const again = await app.call('POST', '/auth/v1/invite', { ...svc, body: { email } });
  t.same([again.status, again.body], [409, { error: 'email already registered' }], 'a confirmed address is not invited');
});

t.test('generate_link: the links of the emails, sent nowhere', async (t) => {
  const email = uniqueEmail('gl');
  const sign = await app.call('POST', '/auth/v1/admin/generate_link', { ...svc, body: { type: 'signup', email, password: PASSWORD, data: { a: 1 } } });
  t.equal(sign.status, 200);
  t.equal(sign.body.verification_type, 'signup');
  t.equal(sign.body.email, email);
  t.same(sign.body.user_metadata, { a: 1 });
  t.match(sign.body.action_link, /^https:\/\/api\.plinth\.test\/auth\/v1\/verify\?token=/);
  t.equal(sign.body.redirect_to, 'https://app.plinth.test');
  t.match(sign.body.hashed_token, /^[0-9a-f]{64}$/);
  const verify = new URL(sign.body.action_link as string);
  t.equal((await app.call('GET', verify.pathname + verify.search)).status, 200, 'the verification link confirms');
  t.equal((await signIn(app, email)).status, 200, 'the password given signs in');

  const magic = await app.call('POST', '/auth/v1/admin/generate_link', { ...svc, body: { type: 'magiclink', email } });
  t.equal(magic.body.verification_type, 'magiclink');
  const m = new URL(magic.body.action_link as string);
  t.equal((await app.call('GET', m.pathname + m.search)).status, 302, 'the magic link signs in');

  const rec = await app.call('POST', '/auth/v1/admin/generate_link', { ...svc, body: { type: 'recovery', email } });
  t.match(rec.body.action_link, /^https:\/\/app\.plinth\.test\/reset-password\?token=/);
  const done = await app.call('POST', '/auth/v1/recover/confirm', { body: { token: tokenOfLink(rec.body.action_link as string), password: 'another password' } });
  t.equal(done.status, 200, 'the recovery link sets a password');

  const fresh = uniqueEmail('glnew');
  const asSignup = await app.call('POST', '/auth/v1/admin/generate_link', { ...svc, body: { type: 'magiclink', email: fresh } });
  t.equal(asSignup.body.verification_type, 'signup', 'a magic link for an unknown address is a signup (GoTrue)');
  const inv = await app.call('POST', '/auth/v1/admin/generate_link', { ...svc, body: { type: 'invite', email: uniqueEmail('glinv') } });
  t.equal(inv.body.verification_type, 'invite');
  t.match(inv.body.action_link, /\/auth\/v1\/magiclink\/verify\?token=/);
  await t.rejects(smtp.next(email, 500), 'generate_link sends no email');
});
