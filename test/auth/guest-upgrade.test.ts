/**
 * Guests become users: a guest that gives an email and a password (PUT or PATCH
 * /auth/v1/user) keeps its id and the rows keyed on it and, once the address is
 * confirmed, is `is_anonymous: false` with the `authenticated` role — at once without
 * REQUIRE_EMAIL_VERIFICATION, after the emailed link (real SMTP receiver) with it; a guest
 * that links an OAuth identity (GET /auth/v1/user/identities/authorize, a real OpenID
 * provider) the same.
 */
import t from 'tap';
import { createTestDatabase } from '../helpers/database.ts';
import type { TestApp } from '../helpers/app.ts';
import { jwtPayload, linksOf, PASSWORD, refresh, signIn, startAuthApp, startSmtp, uniqueEmail } from './helpers.ts';
import { callback, landing, REDIRECT_URI, SITE_URL, STATE_COOKIE, visitProvider } from './oauth/browser.ts';
import { startOidcProvider } from './oauth/fakes.ts';

async function seeded() {
  const db = await createTestDatabase(t);
  await db.sql.unsafe(`
    create table public.carts (id bigint generated always as identity primary key, owner uuid not null default auth.uid(), item text not null);
    alter table public.carts enable row level security;
    create policy own_carts on public.carts for all to anonymous, authenticated using (owner = auth.uid()) with check (owner = auth.uid());
    grant select, insert on public.carts to anonymous, authenticated;
  `);
  return db;
}

/** A guest with a row of its own. */
async function guestWithRow(app: TestApp) {
  const g = await app.call('POST', '/auth/v1/anonymous');
  if (g.status !== 201) throw new Error(`anonymous: ${g.status}`);
  const ins = await app.call('POST', '/rest/v1/carts', { token: g.body.access_token as string, body: { item: 'a lamp' } });
  if (ins.status !== 201) throw new Error(`insert: ${ins.status} ${ins.text}`);
  return g.body as { access_token: string; refresh_token: string; user: { id: string } };
}

const items = async (app: TestApp, token: string) => (await app.call('GET', '/rest/v1/carts?select=item', { token })).body as unknown;

t.test('without REQUIRE_EMAIL_VERIFICATION: a user at once, same id, same rows', async (t) => {
  const app = await startAuthApp(t, { db: await seeded(), env: { ALLOW_ANONYMOUS_SIGNIN: 'true' } });
  for (const method of ['PUT', 'PATCH']) {
    const guest = await guestWithRow(app);
    const email = uniqueEmail('guest');
    const r = await app.call(method, '/auth/v1/user', { token: guest.access_token, body: { email, password: PASSWORD } });
    t.equal(r.status, 200, method);
    t.equal(r.body.id, guest.user.id);
    t.equal(r.body.role, 'authenticated', `${method}: the authenticated role`);
    const [row] = await app.db.sql`select is_anonymous, role, email_confirmed_at is not null as confirmed from auth.users where id = ${guest.user.id}`;
    t.same({ ...row }, { is_anonymous: false, role: 'authenticated', confirmed: true }, `${method}: no guest any more`);
    const s = await signIn(app, email);
    t.equal(s.status, 200, 'signs in with the email and password');
    const claims = jwtPayload(s.body.access_token as string);
    t.same([claims.sub, claims.is_anonymous, claims.role], [guest.user.id, false, 'authenticated'], 'the same id, not anonymous');
    t.same(await items(app, s.body.access_token as string), [{ item: 'a lamp' }], 'the guest\'s rows are the user\'s');
    const next = await refresh(app, guest.refresh_token);
    t.equal(next.status, 200, 'the guest\'s own session goes on');
    t.same([jwtPayload(next.body.access_token as string).is_anonymous, jwtPayload(next.body.access_token as string).role], [false, 'authenticated']);
  }
  const taken = await guestWithRow(app);
  const other = uniqueEmail('taken');
  await app.call('POST', '/auth/v1/signup', { body: { email: other, password: PASSWORD } });
  const r = await app.call('PUT', '/auth/v1/user', { token: taken.access_token, body: { email: other, password: PASSWORD } });
  t.same([r.status, r.body], [409, { error: 'email already registered' }], 'another account\'s address');
  const [row] = await app.db.sql`select is_anonymous from auth.users where id = ${taken.user.id}`;
  t.equal(row.is_anonymous, true, 'still a guest');
});

t.test('with REQUIRE_EMAIL_VERIFICATION: a guest until the emailed link', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, {
    db: await seeded(),
    env: { ALLOW_ANONYMOUS_SIGNIN: 'true', REQUIRE_EMAIL_VERIFICATION: 'true', SMTP_URL: smtp.url, API_EXTERNAL_URL: 'https://api.plinth.test' },
  });
  const guest = await guestWithRow(app);
  const email = uniqueEmail('vguest');
  const r = await app.call('PATCH', '/auth/v1/user', { token: guest.access_token, body: { email, password: PASSWORD } });
  t.equal(r.status, 200);
  const before = await app.db.sql`select is_anonymous, role from auth.users where id = ${guest.user.id}`;
  t.same({ ...before[0] }, { is_anonymous: true, role: 'anonymous' }, 'a guest while the address is unconfirmed');
  t.same((await signIn(app, email)).body, { error: 'email not verified' });
  const links = linksOf((await smtp.next(email)).text);
  t.equal(links.length, 1, 'a confirmation email');
  const link = new URL(links[0]);
  t.equal(link.pathname, '/auth/v1/verify');
  t.equal((await app.call('GET', link.pathname + link.search)).status, 200);
  const after = await app.db.sql`select is_anonymous, role from auth.users where id = ${guest.user.id}`;
  t.same({ ...after[0] }, { is_anonymous: false, role: 'authenticated' }, 'a user once confirmed');
  const s = await signIn(app, email);
  t.equal(s.status, 200);
  t.equal(jwtPayload(s.body.access_token as string).sub, guest.user.id, 'the same id');
  t.same(await items(app, s.body.access_token as string), [{ item: 'a lamp' }], 'and its rows');
  const audit = await app.db.sql`select action from auth.audit_log_entries where user_id = ${guest.user.id} and action = 'guest_upgraded'`;
  t.equal(audit.length, 1, 'audited');
});

t.test('a guest that links an OAuth identity becomes a user, same id, same rows', async (t) => {
  const oidc = await startOidcProvider(t, { clientId: 'link-oidc', clientSecret: 'link-oidc-secret', redirectUri: REDIRECT_URI, conformIdTokenClaims: true });
  const app = await startAuthApp(t, {
    db: await seeded(),
    worker: false,
    env: { ALLOW_ANONYMOUS_SIGNIN: 'true', SITE_URL, OIDC_CLIENT_ID: 'link-oidc', OIDC_CLIENT_SECRET: 'link-oidc-secret', OIDC_ISSUER_URL: oidc.issuer },
  });
  async function link(token: string, email: string) {
    const start = await app.call('GET', '/auth/v1/user/identities/authorize?provider=oidc', { token });
    if (start.status !== 200) return { start, landing: null };
    const cookie = start.headers.getSetCookie().find((c) => c.startsWith(`${STATE_COOKIE}=`))!.split(';')[0];
    oidc.next = { account: { email, email_verified: true } };
    const back = await visitProvider(new URL(start.body.url as string));
    return { start, landing: landing(await callback(app, back, cookie)) };
  }
  const guest = await guestWithRow(app);
  const email = uniqueEmail('linked');
  const { start, landing: l } = await link(guest.access_token, email);
  t.equal(start.status, 200, 'the provider\'s address, as GoTrue answers it');
  t.equal(l!.target, SITE_URL);
  const token = l!.fragment.get('access_token')!;
  const claims = jwtPayload(token);
  t.same([claims.sub, claims.is_anonymous, claims.role, claims.email], [guest.user.id, false, 'authenticated', email], 'the guest is a user now');
  t.same((jwtPayload(token).app_metadata as Record<string, unknown>).provider, 'oidc');
  t.same(await items(app, token), [{ item: 'a lamp' }], 'with its rows');

  const again = await app.call('GET', '/auth/v1/user/identities/authorize?provider=oidc', { token });
  t.same([again.status, again.body], [422, { error: 'only a guest links an identity' }], 'a user with an address links nothing');
  t.equal((await app.call('GET', '/auth/v1/user/identities/authorize?provider=oidc')).status, 401, 'a user\'s token is needed');

  await app.call('PUT', `/auth/v1/admin/users/${guest.user.id}`, { token: app.serviceKey, body: { ban_duration: '1h' } });
  const started = await app.call('GET', '/auth/v1/authorize?provider=oidc');
  oidc.next = { account: { email, email_verified: true } };
  const cookie = started.headers.getSetCookie().find((c) => c.startsWith(`${STATE_COOKIE}=`))!.split(';')[0];
  const banned = landing(await callback(app, await visitProvider(new URL(started.headers.get('location')!)), cookie));
  t.same([banned.target, banned.fragment.get('error'), banned.fragment.get('error_description')], [SITE_URL, 'access_denied', 'user is banned'],
    'a banned user\'s OAuth sign-in lands back at the site with the reason');

  const other = await guestWithRow(app);
  const taken = await link(other.access_token, email);
  t.same([taken.landing!.fragment.get('error')], ['identity_already_exists'], 'another account\'s address');
  const [row] = await app.db.sql`select is_anonymous, email from auth.users where id = ${other.user.id}`;
  t.same({ ...row }, { is_anonymous: true, email: null }, 'that guest stays a guest');
});
