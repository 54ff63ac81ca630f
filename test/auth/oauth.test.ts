/**
 * OAuth sign-in (issue 7; interface §4.2 authorize and callback, OAuth rules 1–4; contract
 * §2 endpoint overrides, §10 state cookie and Microsoft linking), end to end over real
 * HTTP: the service, a real OpenID provider (`oidc-provider`) as `oidc` (discovered) and,
 * through the endpoint overrides, as google and microsoft; a GitHub-shaped and an
 * Apple-shaped server. Every flow starts at /auth/v1/authorize, goes through the provider
 * and ends at the callback's 302 to SITE_URL.
 */
import t, { type Test } from 'tap';
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { PASSWORD, jwtPayload, refresh, signIn, signUp, uniqueEmail } from './helpers.ts';
import { REDIRECT_URI, SITE_URL, STATE_COOKIE, callback, landing, signInWith, startSignIn, visitProvider, type Flow } from './oauth/browser.ts';
import { startApple, startGitHub, startOidcProvider, type AppleFake, type GitHubFake, type OidcFake } from './oauth/fakes.ts';

const CONSUMER_TENANT = '9188040d-6c67-4c5b-b112-36a304b66dad';
const WORK_TENANT = '72f988bf-86f1-41af-91ab-2d7cd011db47';
const client = (name: string) => ({ clientId: `${name}-client`, clientSecret: `${name}-secret-${name}`, redirectUri: REDIRECT_URI });

interface World {
  db: TestDatabase;
  app: TestApp;
  oidc: OidcFake;
  google: OidcFake;
  microsoft: OidcFake;
  github: GitHubFake;
  apple: AppleFake;
}

function microsoftEnv(ms: OidcFake): Record<string, string> {
  return {
    MICROSOFT_CLIENT_ID: client('microsoft').clientId,
    MICROSOFT_CLIENT_SECRET: client('microsoft').clientSecret,
    MICROSOFT_AUTHORIZE_URL: ms.authorizeUrl,
    MICROSOFT_TOKEN_URL: ms.tokenUrl,
    MICROSOFT_USERINFO_URL: ms.userinfoUrl,
  };
}

async function world(t: Test): Promise<World> {
  const oidc = await startOidcProvider(t, { ...client('oidc'), conformIdTokenClaims: true });
  const google = await startOidcProvider(t, { ...client('google'), issuer: 'https://accounts.google.com', tokenEndpointAuthMethod: 'client_secret_post' });
  const microsoft = await startOidcProvider(t, {
    ...client('microsoft'),
    issuer: `https://login.microsoftonline.com/${CONSUMER_TENANT}/v2.0`,
    tokenEndpointAuthMethod: 'client_secret_post',
  });
  const github = await startGitHub(t, client('github'));
  const apple = await startApple(t, { clientId: 'com.example.plinth', redirectUri: REDIRECT_URI });
  const db = await createTestDatabase(t);
  const app = await startApp(t, {
    db,
    worker: false,
    env: {
      SITE_URL,
      AUTH_RATE_LIMIT: '0',
      OIDC_CLIENT_ID: client('oidc').clientId,
      OIDC_CLIENT_SECRET: client('oidc').clientSecret,
      OIDC_ISSUER_URL: oidc.issuer,
      GOOGLE_CLIENT_ID: client('google').clientId,
      GOOGLE_CLIENT_SECRET: client('google').clientSecret,
      GOOGLE_AUTHORIZE_URL: google.authorizeUrl,
      GOOGLE_TOKEN_URL: google.tokenUrl,
      GOOGLE_USERINFO_URL: google.userinfoUrl,
      ...microsoftEnv(microsoft),
      GITHUB_CLIENT_ID: client('github').clientId,
      GITHUB_CLIENT_SECRET: client('github').clientSecret,
      GITHUB_AUTHORIZE_URL: github.authorizeUrl,
      GITHUB_TOKEN_URL: github.tokenUrl,
      GITHUB_USERINFO_URL: github.userinfoUrl,
      ...apple.env,
    },
  });
  return { db, app, oidc, google, microsoft, github, apple };
}

/** A signed-in flow: the fragment's tokens, the user as GET /auth/v1/user shows it, and the row. */
async function signedIn(t: Test, app: TestApp, db: TestDatabase, flow: Flow) {
  t.equal(flow.res.status, 302, 'the callback redirects');
  t.equal(flow.landing.target, SITE_URL, 'to the SITE_URL root');
  const f = flow.landing.fragment;
  t.same([...f.keys()].sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type'], 'with the token fragment', { location: flow.landing.location });
  t.equal(f.get('token_type'), 'bearer');
  const me = await app.call('GET', '/auth/v1/user', { token: f.get('access_token') ?? '' });
  t.equal(me.status, 200, 'the access token works');
  const [row] = await db.sql<{ providers: string[]; provider: string | null; email_confirmed: boolean }[]>`
    select providers, provider, email_confirmed_at is not null as email_confirmed from auth.users where id = ${me.body.id}`;
  return { fragment: f, user: me.body, row, claims: jwtPayload(f.get('access_token') ?? '') };
}

function failedWith(t: Test, res: { status: number; headers: Headers }, error: string) {
  const l = landing(res as never);
  t.equal(l.status, 302, `${error}: 302`);
  t.equal(l.target, SITE_URL, `${error}: back to SITE_URL`);
  t.equal(l.fragment.get('error'), error, `error=${error}`, { location: l.location });
  t.ok((l.fragment.get('error_description') ?? '').length > 0, 'with an error_description');
  t.notOk(l.fragment.has('access_token'), 'and no tokens');
  t.match(res.headers.getSetCookie().join('\n'), new RegExp(`${STATE_COOKIE}=;[^\\n]*Max-Age=0`), 'the state cookie is cleared');
  return l;
}

async function countUsers(db: TestDatabase, email: string): Promise<number> {
  const [r] = await db.sql<{ n: number }[]>`select count(*)::int as n from auth.users where lower(email) = lower(${email})`;
  return r.n;
}

t.test('OAuth sign-in', async (t) => {
  const w = await world(t);
  const { app, db } = w;

  t.test('authorize: unknown, unconfigured or missing provider → 400 unsupported provider', async (t) => {
    for (const q of ['?provider=facebook', '?provider=', '', '?provider=__proto__', '?provider=google&provider=github']) {
      const r = await app.call('GET', `/auth/v1/authorize${q}`);
      t.equal(r.status, 400, q);
      t.same(r.body, { error: 'unsupported provider' }, q);
    }
    const onlyGithub = await startApp(t, {
      db,
      worker: false,
      env: { SITE_URL, GITHUB_CLIENT_ID: 'x', GITHUB_CLIENT_SECRET: 'y', GOOGLE_CLIENT_ID: 'only-the-id' },
    });
    for (const p of ['google', 'microsoft', 'apple', 'oidc']) {
      const r = await onlyGithub.call('GET', `/auth/v1/authorize?provider=${p}`);
      t.equal(r.status, 400, `${p} is not configured`);
      t.same(r.body, { error: 'unsupported provider' });
    }
    t.equal((await onlyGithub.call('GET', '/auth/v1/authorize?provider=github')).status, 302, 'github is');
  });

  t.test('authorize: 302 to the provider with redirect_uri, state (hashed in SQL, in a cookie), PKCE and nonce', async (t) => {
    const expected = {
      oidc: { endpoint: w.oidc.authorizeUrl, pkce: true, nonce: true, formPost: false },
      google: { endpoint: w.google.authorizeUrl, pkce: true, nonce: true, formPost: false },
      microsoft: { endpoint: w.microsoft.authorizeUrl, pkce: true, nonce: true, formPost: false },
      github: { endpoint: w.github.authorizeUrl, pkce: true, nonce: false, formPost: false },
      apple: { endpoint: w.apple.authorizeUrl, pkce: false, nonce: true, formPost: true },
    };
    for (const [name, e] of Object.entries(expected)) {
      const s = await startSignIn(app, name, '&redirect_to=https%3A%2F%2Fevil.example%2Fsteal');
      t.equal(s.res.status, 302, `${name}: 302`);
      t.equal(s.res.headers.get('cache-control'), 'no-store');
      t.equal(s.location.origin + s.location.pathname, e.endpoint, `${name}: to the provider's authorize endpoint`);
      const q = s.location.searchParams;
      t.equal(q.get('redirect_uri'), `${SITE_URL}/auth/v1/callback`, `${name}: redirect_uri is exactly SITE_URL/auth/v1/callback`);
      t.equal(q.get('response_type'), 'code');
      t.equal(q.get('client_id'), name === 'apple' ? 'com.example.plinth' : client(name).clientId);
      t.ok(s.location.href.indexOf('evil.example') < 0, `${name}: redirect_to is ignored`);
      t.match(q.get('state'), /^[A-Za-z0-9_-]{43}$/, `${name}: a random state`);
      t.equal(q.get('code_challenge_method'), e.pkce ? 'S256' : null, `${name}: PKCE ${e.pkce ? 'S256' : 'not sent'}`);
      t.equal(q.get('code_challenge') !== null, e.pkce);
      t.equal(q.get('nonce') !== null, e.nonce, `${name}: nonce ${e.nonce ? 'sent' : 'not sent'}`);
      t.equal(q.get('response_mode'), e.formPost ? 'form_post' : null);
      t.equal(s.cookie, `${STATE_COOKIE}=${q.get('state')}`, `${name}: the cookie holds the state`);
      const attrs = (s.setCookie ?? '').split(';').map((a) => a.trim());
      t.ok(attrs.includes('HttpOnly'), `${name}: HttpOnly`);
      t.ok(attrs.includes('Path=/auth/v1/callback'), `${name}: on the callback path only`);
      t.ok(attrs.includes('Max-Age=600'), `${name}: for 10 minutes`);
      if (e.formPost) t.ok(attrs.includes('SameSite=None') && attrs.includes('Secure'), `${name}: SameSite=None; Secure for the form post`);
      else t.ok(attrs.includes('SameSite=Lax'), `${name}: SameSite=Lax`);
      const rows = await db.sql<{ provider: string; has_verifier: boolean; has_nonce: boolean; ttl: number }[]>`
        select provider, code_verifier is not null as has_verifier, nonce is not null as has_nonce,
               round(extract(epoch from expires_at - created_at))::int as ttl
        from auth_private.oauth_states where state_hash = sha256(convert_to(${q.get('state')}, 'utf8'))`;
      t.same(rows, [{ provider: name, has_verifier: e.pkce, has_nonce: e.nonce, ttl: 600 }], `${name}: stored by its SHA-256 with verifier and nonce`);
    }
    const last = await startSignIn(app, 'oidc');
    const [clear] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from auth_private.oauth_states where state_hash = convert_to(${last.state}, 'utf8')`;
    t.equal(clear.n, 0, 'the clear state is not stored');
  });

  t.test('oidc (discovered): a new account, email from userinfo; provider set, user_metadata {}', async (t) => {
    const email = uniqueEmail('oidc');
    w.oidc.next = { account: { email, email_verified: true } };
    const flow = await signInWith(app, 'oidc');
    t.equal(flow.returned.method, 'GET');
    const s = await signedIn(t, app, db, flow);
    t.equal(s.user.email, email);
    t.equal(s.user.provider, 'oidc');
    t.same(s.user.user_metadata, {});
    t.same(s.row.providers, ['oidc']);
    t.equal(s.row.email_confirmed, true);
    t.equal(s.claims.sub, s.user.id);
    t.equal(s.claims.role, 'authenticated');
    t.equal(s.claims.email, email);
    t.match(s.claims.session_id, /^[0-9a-f-]{36}$/, 'the access token carries its session_id');
    const refreshed = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'refresh_token', refresh_token: s.fragment.get('refresh_token') } });
    t.equal(refreshed.status, 200, 'the refresh token works');
    t.equal(jwtPayload(refreshed.body.access_token).session_id, s.claims.session_id, 'and keeps the family');
    t.equal(flow.res.headers.get('referrer-policy'), 'no-referrer');
    t.equal(flow.res.headers.get('cache-control'), 'no-store');
  });

  t.test('google (id_token from an issuer https://accounts.google.com), then github: one account, providers accumulate', async (t) => {
    const email = uniqueEmail('both');
    w.google.next = { account: { email, email_verified: true } };
    const first = await signedIn(t, app, db, await signInWith(app, 'google'));
    t.equal(first.user.provider, 'google');
    t.same(first.row.providers, ['google']);

    w.github.next = { account: { id: 4242, login: 'octo', emails: [{ email: email.toUpperCase(), primary: true, verified: true }] } };
    const second = await signedIn(t, app, db, await signInWith(app, 'github'));
    t.equal(second.user.id, first.user.id, 'the same verified email signs in to the same account');
    t.equal(second.user.provider, 'github', 'provider is the latest sign-in');
    t.same(second.row.providers, ['google', 'github'], 'providers accumulate');
    t.not(second.claims.session_id, first.claims.session_id, 'a new session');

    w.google.next = { account: { email, email_verified: true } };
    const third = await signedIn(t, app, db, await signInWith(app, 'google'));
    t.equal(third.user.id, first.user.id);
    t.same(third.row.providers, ['google', 'github'], 'a provider is listed once');
    t.equal(await countUsers(db, email), 1);
  });

  t.test('an email/password account is linked by a provider-verified email; a password set before the address was proven goes', async (t) => {
    // Sign-ups are confirmed at once but prove nothing: whoever signed up may not own the
    // address (takeover.test.ts has the attacks, and the proven account that keeps all).
    const { email, session } = await signUp(app, uniqueEmail('pw'), PASSWORD, { plan: 'pro' });
    w.oidc.next = { account: { email, email_verified: true } };
    const s = await signedIn(t, app, db, await signInWith(app, 'oidc'));
    t.equal(s.user.id, session.user.id, 'linked to the existing account');
    t.same(s.row.providers, ['email', 'oidc']);
    t.same(s.user.user_metadata, {}, 'the metadata from before the proof is reset');
    t.equal((await signIn(app, email)).status, 401, 'the password from before the proof no longer signs in');
    t.equal((await refresh(app, session.refresh_token)).status, 401, 'nor does the session from before');
  });

  t.test('microsoft, consumer tenant: vouched for without xms_edov', async (t) => {
    const email = uniqueEmail('msa');
    w.microsoft.next = { account: { email, tid: CONSUMER_TENANT } };
    const s = await signedIn(t, app, db, await signInWith(app, 'microsoft'));
    t.equal(s.user.provider, 'microsoft');
    t.same(s.row.providers, ['microsoft']);
  });

  t.test('microsoft, work tenant: links with xms_edov true; without it neither links nor creates', async (t) => {
    const work = await startOidcProvider(t, {
      ...client('microsoft'),
      issuer: `https://login.microsoftonline.com/${WORK_TENANT}/v2.0`,
      tokenEndpointAuthMethod: 'client_secret_post',
    });
    const workApp = await startApp(t, { db, worker: false, env: { SITE_URL, ...microsoftEnv(work) } });
    const { email, session } = await signUp(app, uniqueEmail('entra'));

    work.next = { account: { email, tid: WORK_TENANT, xms_edov: false } };
    failedWith(t, (await signInWith(workApp, 'microsoft')).res, 'unverified_email');
    work.next = { account: { email, tid: WORK_TENANT } };
    failedWith(t, (await signInWith(workApp, 'microsoft')).res, 'unverified_email');
    const [before] = await db.sql<{ providers: string[] }[]>`select providers from auth.users where id = ${session.user.id}`;
    t.same(before.providers, ['email'], 'not linked');

    const stranger = uniqueEmail('entra-new');
    work.next = { account: { email: stranger, tid: WORK_TENANT } };
    failedWith(t, (await signInWith(workApp, 'microsoft')).res, 'unverified_email');
    t.equal(await countUsers(db, stranger), 0, 'no account is created for an unvouched address');

    work.next = { account: { email, tid: WORK_TENANT, xms_edov: true } };
    const s = await signedIn(t, workApp, db, await signInWith(workApp, 'microsoft'));
    t.equal(s.user.id, session.user.id, 'xms_edov: true links');
    t.same(s.row.providers, ['email', 'microsoft']);
  });

  t.test('microsoft: an id_token whose issuer is not its own tenant is refused', async (t) => {
    // The fake signs as the consumer tenant but claims the work tenant in tid.
    w.microsoft.next = { account: { email: uniqueEmail('mixup'), tid: WORK_TENANT, xms_edov: true } };
    failedWith(t, (await signInWith(app, 'microsoft')).res, 'server_error');
  });

  t.test('google: email_verified false neither links nor creates', async (t) => {
    const { email, session } = await signUp(app, uniqueEmail('g-unverified'));
    w.google.next = { account: { email, email_verified: false } };
    failedWith(t, (await signInWith(app, 'google')).res, 'unverified_email');
    const [row] = await db.sql<{ providers: string[] }[]>`select providers from auth.users where id = ${session.user.id}`;
    t.same(row.providers, ['email'], 'the existing account is not linked');
    const stranger = uniqueEmail('g-new');
    w.google.next = { account: { email: stranger, email_verified: false } };
    failedWith(t, (await signInWith(app, 'google')).res, 'unverified_email');
    t.equal(await countUsers(db, stranger), 0, 'no account is created');
    w.google.next = { account: { email: stranger } };
    failedWith(t, (await signInWith(app, 'google')).res, 'unverified_email');
    t.equal(await countUsers(db, stranger), 0, 'an absent email_verified counts as unverified');
  });

  t.test('github: the primary verified address; PKCE checked by the fake', async (t) => {
    const email = uniqueEmail('gh');
    w.github.next = {
      account: {
        id: 7,
        login: 'gh',
        emails: [
          { email: uniqueEmail('gh-other'), primary: false, verified: true },
          { email, primary: true, verified: true },
        ],
      },
    };
    const before = w.github.challenges.length;
    const s = await signedIn(t, app, db, await signInWith(app, 'github'));
    t.equal(s.user.email, email, 'the primary address, not another verified one');
    t.equal(s.user.provider, 'github');
    t.same(s.row.providers, ['github']);
    t.equal(w.github.challenges.length, before + 1, 'a PKCE challenge was sent (and the verifier matched it)');

    const unverified = uniqueEmail('gh-unverified');
    w.github.next = {
      account: {
        id: 8,
        login: 'gh2',
        emails: [
          { email: unverified, primary: true, verified: false },
          { email: uniqueEmail('gh-secondary'), primary: false, verified: true },
        ],
      },
    };
    failedWith(t, (await signInWith(app, 'github')).res, 'unverified_email');
    t.equal(await countUsers(db, unverified), 0);
    w.github.next = { account: { id: 9, login: 'gh3', emails: [] } };
    failedWith(t, (await signInWith(app, 'github')).res, 'unverified_email');
  });

  t.test('apple: form_post callback, ES256 client secret, id_token checked against the JWKS', async (t) => {
    const email = uniqueEmail('apple');
    w.apple.next = { login: { email, emailVerified: 'true' } };
    const flow = await signInWith(app, 'apple');
    t.equal(flow.returned.method, 'POST', 'the callback is a form post');
    t.ok(flow.returned.params.has('user'), 'apple also posts a user object (ignored)');
    const s = await signedIn(t, app, db, flow);
    t.equal(s.user.email, email);
    t.equal(s.user.provider, 'apple');
    t.same(s.user.user_metadata, {}, 'the posted name does not reach user_metadata');
    t.same(s.row.providers, ['apple']);
    const secret = w.apple.clientSecrets.at(-1) as Record<string, number>;
    t.ok(secret.exp - secret.iat <= 3600, 'the client secret JWT is short-lived');

    w.apple.next = { login: { email, emailVerified: true } };
    const again = await signedIn(t, app, db, await signInWith(app, 'apple'));
    t.equal(again.user.id, s.user.id, 'a boolean email_verified works too');
  });

  t.test('apple: a nonce that does not match → server_error, nothing created', async (t) => {
    const email = uniqueEmail('apple-nonce');
    w.apple.next = { login: { email, emailVerified: 'true', nonce: 'not-the-one-we-sent' } };
    failedWith(t, (await signInWith(app, 'apple')).res, 'server_error');
    t.equal(await countUsers(db, email), 0);
  });

  t.test('apple: an id_token signed by a key outside the JWKS → server_error', async (t) => {
    const email = uniqueEmail('apple-rogue');
    w.apple.next = { login: { email, emailVerified: 'true', rogueKey: true } };
    failedWith(t, (await signInWith(app, 'apple')).res, 'server_error');
    t.equal(await countUsers(db, email), 0);
  });

  t.test('apple: email_verified "false" → unverified_email', async (t) => {
    const email = uniqueEmail('apple-unverified');
    w.apple.next = { login: { email, emailVerified: 'false' } };
    failedWith(t, (await signInWith(app, 'apple')).res, 'unverified_email');
    t.equal(await countUsers(db, email), 0);
  });

  t.test('the provider refuses (access_denied), by redirect and by form post', async (t) => {
    w.oidc.next = { deny: true };
    const denied = failedWith(t, (await signInWith(app, 'oidc')).res, 'access_denied');
    t.equal(denied.fragment.get('error_description'), 'the sign-in was denied at the provider');
    w.github.next = { deny: true };
    failedWith(t, (await signInWith(app, 'github')).res, 'access_denied');
    w.apple.next = { deny: true };
    const apple = await signInWith(app, 'apple');
    t.equal(apple.returned.params.get('error'), 'user_cancelled_authorize');
    failedWith(t, apple.res, 'access_denied');
  });

  t.test('state: missing, without the cookie, with another cookie, reused, unknown, expired → invalid_state', async (t) => {
    const email = uniqueEmail('state');
    w.oidc.next = { account: { email, email_verified: true } };
    const s = await startSignIn(app, 'oidc');
    const ret = await visitProvider(s.location);

    const noState = new URLSearchParams(ret.params);
    noState.delete('state');
    failedWith(t, await callback(app, { method: 'GET', params: noState }, s.cookie), 'invalid_state');

    const noCookie = failedWith(t, await callback(app, ret, null), 'invalid_state');
    t.equal(noCookie.fragment.get('error_description'), 'the state does not match this browser');

    const other = await startSignIn(app, 'oidc');
    failedWith(t, await callback(app, ret, other.cookie), 'invalid_state');
    failedWith(t, await callback(app, ret, `${STATE_COOKIE}=${ret.params.get('state')}x`), 'invalid_state');

    // None of those burnt the state: the browser that started the flow still completes it.
    const ok = await callback(app, ret, s.cookie);
    const done = await signedIn(t, app, db, { started: s, returned: ret, res: ok, landing: landing(ok) });
    t.equal(done.user.email, email, 'the real callback still succeeds');

    const replay = failedWith(t, await callback(app, ret, s.cookie), 'invalid_state');
    t.equal(replay.fragment.get('error_description'), 'the state was already used', 'a state works once');

    const forged = new URLSearchParams({ code: 'x', state: 'never-issued-state' });
    const unknown = failedWith(t, await callback(app, { method: 'GET', params: forged }, `${STATE_COOKIE}=never-issued-state`), 'invalid_state');
    t.equal(unknown.fragment.get('error_description'), 'unknown state');

    w.oidc.next = { account: { email, email_verified: true } };
    const late = await startSignIn(app, 'oidc');
    const lateRet = await visitProvider(late.location);
    await db.sql`update auth_private.oauth_states set expires_at = now() - interval '1 second'
      where state_hash = sha256(convert_to(${late.state}, 'utf8'))`;
    const expired = failedWith(t, await callback(app, lateRet, late.cookie), 'invalid_state');
    t.match(expired.fragment.get('error_description'), /too long/);
  });

  t.test('the code exchange fails → server_error (tampered code; a token endpoint error)', async (t) => {
    w.oidc.next = { account: { email: uniqueEmail('exchange'), email_verified: true } };
    const s = await startSignIn(app, 'oidc');
    const ret = await visitProvider(s.location);
    ret.params.set('code', 'not-the-code-the-provider-issued');
    failedWith(t, await callback(app, ret, s.cookie), 'server_error');

    const email = uniqueEmail('gh-fail');
    w.github.next = { account: { id: 11, login: 'x', emails: [{ email, primary: true, verified: true }] } };
    w.github.failNextToken = true;
    failedWith(t, (await signInWith(app, 'github')).res, 'server_error');
    t.equal(await countUsers(db, email), 0);
  });

  t.test('a callback without code or error → invalid_request', async (t) => {
    w.oidc.next = { account: { email: uniqueEmail('nocode'), email_verified: true } };
    const s = await startSignIn(app, 'oidc');
    const ret = await visitProvider(s.location);
    ret.params.delete('code');
    failedWith(t, await callback(app, ret, s.cookie), 'invalid_request');
  });

  t.test('the form parser belongs to the callback only', async (t) => {
    const r = await app.call('POST', '/auth/v1/signup', {
      raw: new URLSearchParams({ email: uniqueEmail('form'), password: PASSWORD }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    t.equal(r.status, 400);
    t.same(r.body, { error: 'invalid request body' });
  });

  t.test('APPLE_PRIVATE_KEY that is not an ES256 private key stops the start', async (t) => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    for (const [what, pem, problem] of [
      ['garbage', '-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----', /APPLE_PRIVATE_KEY must be a PEM private key/],
      ['an RSA key', rsa, /APPLE_PRIVATE_KEY must be a P-256 \(ES256\) private key/],
    ] as const) {
      await t.rejects(
        startApp(t, { db, worker: false, env: { SITE_URL, ...w.apple.env, APPLE_PRIVATE_KEY: pem } }),
        { variable: 'APPLE_PRIVATE_KEY', message: problem },
        what,
      );
    }
  });

  t.test('an unreachable oidc issuer: authorize sends the browser back with server_error', async (t) => {
    // A loopback port nobody listens on (taken, then released).
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const down = await startApp(t, {
      db,
      worker: false,
      env: { SITE_URL, OIDC_CLIENT_ID: 'a', OIDC_CLIENT_SECRET: 'b', OIDC_ISSUER_URL: `http://127.0.0.1:${port}/issuer` },
    });
    const s = await startSignIn(down, 'oidc');
    failedWith(t, s.res, 'server_error');
  });
});
