/**
 * Account pre-takeover, performed against a real plinth with a real SMTP receiver and a
 * real OpenID provider (`oidc-provider`, as in oauth.test.ts):
 *  (a) an attacker claims `victim@corp` first — by signing up (confirmed at once by
 *      default) or by moving their own account there with PATCH — and waits for the
 *      victim's "Sign in with …": the attacker's password, metadata and sessions must not
 *      survive the victim's provider-verified sign-in;
 *  (b) with REQUIRE_EMAIL_VERIFICATION=true a squatter signs up with the victim's address;
 *      the victim, refused at sign-up, uses a magic link: the squatter's password and
 *      metadata must be gone.
 * And what the owner of a proven address keeps; an email or password change ends the
 * other sessions and tells the former address.
 */
import t, { type Test } from 'tap';
import type { TestApp } from '../helpers/app.ts';
import { PASSWORD, linksOf, refresh, signIn, signUp, startAuthApp, startSmtp, uniqueEmail, type SmtpReceiver } from './helpers.ts';
import { REDIRECT_URI, SITE_URL, signInWith } from './oauth/browser.ts';
import { startOidcProvider, type OidcFake } from './oauth/fakes.ts';

const ATTACKER_PASSWORD = 'the attacker knows this one';
const INVALID_REFRESH = { error: 'invalid refresh token' };

interface Tokens {
  access_token: string;
  refresh_token: string;
}

function fragmentTokens(location: string): Tokens {
  const f = new URLSearchParams(location.split('#')[1] ?? '');
  const access_token = f.get('access_token');
  const refresh_token = f.get('refresh_token');
  if (!access_token || !refresh_token) throw new Error(`no session in ${location}`);
  return { access_token, refresh_token };
}

async function magicLinkSession(app: TestApp, smtp: SmtpReceiver, email: string): Promise<Tokens> {
  const r = await app.call('POST', '/auth/v1/magiclink', { body: { email } });
  if (r.status !== 200) throw new Error(`magiclink: ${r.status}`);
  const [link] = linksOf((await smtp.next(email)).text);
  const u = new URL(link);
  const v = await app.call('GET', u.pathname + u.search);
  if (v.status !== 302) throw new Error(`magiclink/verify: ${v.status} ${v.text}`);
  return fragmentTokens(v.headers.get('location')!);
}

async function me(app: TestApp, token: string) {
  const r = await app.call('GET', '/auth/v1/user', { token });
  if (r.status !== 200) throw new Error(`GET /auth/v1/user: ${r.status}`);
  return r.body as { id: string; email: string; user_metadata: Record<string, unknown> };
}

t.test('pre-takeover by OAuth (REQUIRE_EMAIL_VERIFICATION=false, the default)', async (t) => {
  const smtp = await startSmtp(t);
  const oidc: OidcFake = await startOidcProvider(t, { clientId: 'oidc-client', clientSecret: 'oidc-secret-oidc', redirectUri: REDIRECT_URI });
  const app = await startAuthApp(t, {
    env: { SMTP_URL: smtp.url, SITE_URL, OIDC_CLIENT_ID: 'oidc-client', OIDC_CLIENT_SECRET: 'oidc-secret-oidc', OIDC_ISSUER_URL: oidc.issuer },
  });

  async function victimSignsInWithProvider(t: Test, email: string): Promise<Tokens> {
    oidc.next = { account: { email, email_verified: true } };
    const flow = await signInWith(app, 'oidc');
    t.equal(flow.res.status, 302, 'the victim signs in with the provider');
    return fragmentTokens(flow.landing.location);
  }

  t.test('(a) the attacker signed up with the victim\'s address first', async (t) => {
    const victim = uniqueEmail('victim');
    const squat = await signUp(app, victim, ATTACKER_PASSWORD, { planted: 'by the attacker' });
    const second = await signIn(app, victim, ATTACKER_PASSWORD);
    t.equal(second.status, 200, 'the sign-up is confirmed at once: the attacker holds two sessions');

    const v = await victimSignsInWithProvider(t, victim);
    const user = await me(app, v.access_token);
    t.equal(user.id, squat.session.user.id, 'the victim lands in the account of the address');
    t.equal((await signIn(app, victim, ATTACKER_PASSWORD)).status, 401, 'the attacker\'s password no longer signs in');
    t.same((await refresh(app, squat.session.refresh_token)).body, INVALID_REFRESH, 'the attacker\'s sign-up session is revoked');
    t.same((await refresh(app, second.body.refresh_token)).body, INVALID_REFRESH, 'and their password session');
    t.same(user.user_metadata, {}, 'the planted metadata is gone');
    t.equal((await refresh(app, v.refresh_token)).status, 200, 'the victim\'s own session works');
    t.equal((await me(app, v.access_token)).email, victim);
  });

  t.test('(a) the attacker moved their account to the victim\'s address with PATCH', async (t) => {
    const attacker = uniqueEmail('attacker');
    await signUp(app, attacker, PASSWORD);
    // The attacker even proves their own address first: that proof must not carry over.
    const m = await magicLinkSession(app, smtp, attacker);
    t.equal((await app.call('PATCH', '/auth/v1/user', { token: m.access_token, body: { password: ATTACKER_PASSWORD, data: { planted: true } } })).status, 200);
    const victim = uniqueEmail('victim-patched');
    const moved = await app.call('PATCH', '/auth/v1/user', { token: m.access_token, body: { email: victim } });
    t.equal(moved.status, 200, 'the email changes at once (interface)');
    t.equal((await signIn(app, victim, ATTACKER_PASSWORD)).status, 200, 'and the new address signs in (interface)');
    t.equal((await refresh(app, m.refresh_token)).status, 200, 'the attacker\'s session survives their own change');
    const attackerSession = (await signIn(app, victim, ATTACKER_PASSWORD)).body as Tokens;

    const v = await victimSignsInWithProvider(t, victim);
    const user = await me(app, v.access_token);
    t.equal(user.id, moved.body.id, 'the victim lands in the moved account');
    t.equal((await signIn(app, victim, ATTACKER_PASSWORD)).status, 401, 'the attacker\'s password no longer signs in');
    t.same((await refresh(app, attackerSession.refresh_token)).body, INVALID_REFRESH, 'the attacker\'s sessions are revoked');
    t.same(user.user_metadata, {}, 'the planted metadata is gone');
    t.equal((await refresh(app, v.refresh_token)).status, 200, 'the victim\'s session works');
  });

  t.test('the owner of a proven address keeps password, metadata and sessions', async (t) => {
    const owner = uniqueEmail('owner');
    await signUp(app, owner, PASSWORD);
    const m = await magicLinkSession(app, smtp, owner); // proves the address
    t.equal((await app.call('PATCH', '/auth/v1/user', { token: m.access_token, body: { password: 'chosen after the proof', data: { plan: 'pro' } } })).status, 200);
    const v = await victimSignsInWithProvider(t, owner);
    t.same((await me(app, v.access_token)).user_metadata, { plan: 'pro' }, 'metadata kept');
    t.equal((await signIn(app, owner, 'chosen after the proof')).status, 200, 'password kept');
    t.equal((await refresh(app, m.refresh_token)).status, 200, 'the earlier session kept');
  });

  t.test('an email or password change ends the other sessions and tells the former address', async (t) => {
    const { email, session: a } = await signUp(app);
    const b = (await signIn(app, email)).body as Tokens;
    const next = uniqueEmail('next');
    const moved = await app.call('PATCH', '/auth/v1/user', { token: a.access_token, body: { email: next } });
    t.equal(moved.status, 200);
    t.same((await refresh(app, b.refresh_token)).body, INVALID_REFRESH, 'the other session ends');
    const kept = await refresh(app, a.refresh_token);
    t.equal(kept.status, 200, 'the caller\'s session stays');
    const notice = await smtp.next(email);
    t.equal(notice.subject, 'The email address of your account was changed');
    t.match(notice.text, next.toLowerCase(), 'the former address is told the new one');
    t.same(linksOf(notice.text), [], 'a plain notice: no link');

    const c = (await signIn(app, next)).body as Tokens;
    t.equal((await app.call('PATCH', '/auth/v1/user', { token: kept.body.access_token, body: { password: 'a changed password' } })).status, 200);
    t.same((await refresh(app, c.refresh_token)).body, INVALID_REFRESH, 'a password change ends the other sessions too');
    t.equal((await refresh(app, kept.body.refresh_token)).status, 200, 'but not the caller\'s');
    const pw = await smtp.next(next.toLowerCase());
    t.equal(pw.subject, 'The password of your account was changed');
    t.same(linksOf(pw.text), []);
    t.equal((await app.call('PATCH', '/auth/v1/user', { token: kept.body.access_token, body: { data: { x: 1 } } })).status, 200);
    await t.rejects(smtp.next(next.toLowerCase(), 1000), 'a metadata change tells nobody');
  });
});

t.test('(b) REQUIRE_EMAIL_VERIFICATION=true: a squatter\'s account, then the victim\'s magic link', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, { env: { SMTP_URL: smtp.url, REQUIRE_EMAIL_VERIFICATION: 'true' } });

  t.test('the squatter\'s password and metadata are gone', async (t) => {
    const victim = uniqueEmail('victim-v');
    const squat = await app.call('POST', '/auth/v1/signup', { body: { email: victim, password: ATTACKER_PASSWORD, data: { planted: true } } });
    t.equal(squat.status, 200, 'the squatter signs up with the victim\'s address');
    await smtp.next(victim); // the confirmation the squatter caused; the victim does not open it
    const refused = await app.call('POST', '/auth/v1/signup', { body: { email: victim, password: PASSWORD } });
    t.equal(refused.status, 409, 'the victim is refused at sign-up');

    const v = await magicLinkSession(app, smtp, victim);
    t.same((await me(app, v.access_token)).user_metadata, {}, 'the squatter\'s metadata is gone');
    const squatter = await signIn(app, victim, ATTACKER_PASSWORD);
    t.equal(squatter.status, 401, 'the squatter\'s password no longer signs in');
    t.same(squatter.body, { error: 'invalid email or password' });
    t.equal((await refresh(app, v.refresh_token)).status, 200, 'the victim\'s session works');
  });

  t.test('the verification link keeps the password of the sign-up it confirms', async (t) => {
    const email = uniqueEmail('verified');
    t.equal((await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD, data: { plan: 'pro' } } })).status, 200);
    const [link] = linksOf((await smtp.next(email)).text);
    const u = new URL(link);
    t.equal((await app.call('GET', u.pathname + u.search)).status, 200);
    t.equal((await signIn(app, email)).status, 200, 'the password signs in');
    // The address is proven now: a magic link later takes nothing away.
    const m = await magicLinkSession(app, smtp, email);
    t.same((await me(app, m.access_token)).user_metadata, { plan: 'pro' });
    t.equal((await signIn(app, email)).status, 200, 'the password still signs in after a magic link');
  });
});
