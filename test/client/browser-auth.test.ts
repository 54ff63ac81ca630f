/// <reference lib="dom" />
/**
 * The client library's auth in a real browser (issue 16 §7): sessions in sessionStorage
 * (not localStorage), a second tab signed out, TOKEN_REFRESHED 60 s before expiry with
 * ACCESS_TOKEN_TTL=65 and the next request on the new token, a replayed refresh token
 * ending in SIGNED_OUT, magic link and OAuth (a real OpenID provider) through the URL
 * fragment, password recovery, updateUser and signOut.
 */
import t from 'tap';
import type { Page } from 'playwright-core';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, linksOf, refresh, startSmtp, tokenOfLink, uniqueEmail } from '../auth/helpers.ts';
import { startOidcProvider } from '../auth/oauth/fakes.ts';
import { chromiumMissing, launch, openPage, startPages, until, waitForClient } from './browser.ts';

const KEY = 'plinth.auth.token';
type W = any;

const missing = chromiumMissing();
if (missing) {
  t.plan(0, missing);
} else {
  await run();
}

async function events(page: Page): Promise<{ event: string; at: number; token: string | null; refresh: string | null }[]> {
  return page.evaluate(() => (window as W).events);
}

async function run() {
  const [site] = await startPages(t, 1);
  const smtp = await startSmtp(t);
  const oidc = await startOidcProvider(t, { clientId: 'plinth-oidc', clientSecret: 'oidc-secret', redirectUri: `${site.origin}/auth/v1/callback` });
  const app = await startApp(t, {
    env: {
      SITE_URL: site.origin,
      ACCESS_TOKEN_TTL: '65',
      AUTH_RATE_LIMIT: '0',
      SMTP_URL: smtp.url,
      // The service is reached under SITE_URL too (the page server proxies /auth/v1/).
      API_EXTERNAL_URL: site.origin,
      OIDC_CLIENT_ID: 'plinth-oidc',
      OIDC_CLIENT_SECRET: 'oidc-secret',
      OIDC_ISSUER_URL: oidc.issuer,
    },
  });
  site.app = { url: app.url, anonKey: app.anonKey };
  const ctx = await launch(t);
  const email = uniqueEmail('browser');

  await t.test('sign-up keeps the session in sessionStorage, not localStorage; a second tab starts signed out', async (t) => {
    const page = await openPage(ctx, site.origin);
    const r = await page.evaluate(
      async ({ email, password }) => {
        const c = (window as W).client;
        const { data, error } = await c.auth.signUp({ email, password, options: { data: { name: 'Ada' } } });
        return { error, user: data?.user, token: data?.session?.access_token };
      },
      { email, password: PASSWORD },
    );
    t.equal(r.error, null);
    t.equal(r.user.email, email);
    t.same(r.user.user_metadata, { name: 'Ada' });
    const stored = await page.evaluate((k) => ({ session: sessionStorage.getItem(k), local: localStorage.length, cookie: document.cookie }), KEY);
    t.ok(stored.session, 'session in sessionStorage');
    t.equal(JSON.parse(stored.session!).access_token, r.token);
    t.equal(stored.local, 0, 'nothing in localStorage');
    t.equal(stored.cookie, '', 'no cookie either');
    t.same((await events(page)).map((e) => e.event), ['SIGNED_IN']);

    // The same tab after a reload is still signed in.
    await page.reload();
    await waitForClient(page);
    const again = await page.evaluate(async () => (await (window as W).client.auth.getUser()).data?.user?.email);
    t.equal(again, email, 'reloaded tab keeps its session');

    const second = await openPage(ctx, site.origin);
    const s2 = await second.evaluate(async (k) => {
      const c = (window as W).client;
      const { data } = await c.auth.getSession();
      const user = await c.auth.getUser();
      return { session: data.session, stored: sessionStorage.getItem(k), userError: user.error && { message: user.error.message, status: user.error.status } };
    }, KEY);
    t.equal(s2.session, null, 'second tab has no session');
    t.equal(s2.stored, null);
    t.same(s2.userError, { message: 'not signed in', status: 401 });

    const wrong = await second.evaluate(async (email) => {
      const { data, error } = await (window as W).client.auth.signInWithPassword({ email, password: 'not the password' });
      return { data, error: error && { message: error.message, status: error.status } };
    }, email);
    t.same(wrong, { data: null, error: { message: 'invalid email or password', status: 401 } }, 'an HTTP error is {data: null, error} with the service message');
    await page.close();
    await second.close();
  });

  await t.test('TOKEN_REFRESHED 60 s before expiry, and the next request carries the new token', async (t) => {
    const page = await openPage(ctx, site.origin);
    const start = await page.evaluate(
      async ({ email, password }) => {
        const { data } = await (window as W).client.auth.signInWithPassword({ email, password });
        return { at: Date.now(), token: data.session.access_token, expiresAt: data.session.expires_at };
      },
      { email, password: PASSWORD },
    );
    const refreshed = await until(page, () => (window as W).events.find((e: any) => e.event === 'TOKEN_REFRESHED'), 30_000);
    const delay = refreshed.at - start.at;
    // exp = iat + 65, so the refresh is due at iat + 5 s: about 5 s after sign-in.
    t.ok(refreshed.at >= (start.expiresAt - 60) * 1000 - 50, `refreshed ${delay} ms after sign-in: 60 s before expiry, not earlier`);
    t.not(refreshed.token, start.token, 'a new access token');
    t.same((await events(page)).map((e) => e.event), ['SIGNED_IN', 'TOKEN_REFRESHED'], 'refreshed once');
    const [req] = await Promise.all([
      page.waitForRequest((r) => r.url().endsWith('/auth/v1/user') && r.method() === 'GET'),
      page.evaluate(() => (window as W).client.auth.getUser()),
    ]);
    t.equal((await req.allHeaders()).authorization, `Bearer ${refreshed.token}`, 'next request uses the new token');
    const stored = await page.evaluate((k) => JSON.parse(sessionStorage.getItem(k)!).access_token, KEY);
    t.equal(stored, refreshed.token, 'stored session updated');
    await page.close();
  });

  await t.test('several calls and two clients racing for a due token refresh it once', async (t) => {
    const page = await openPage(ctx, site.origin);
    const refreshes: string[] = [];
    page.on('request', (r) => {
      if (r.url().endsWith('/auth/v1/token') && (r.postData() ?? '').includes('refresh_token')) refreshes.push(r.url());
    });
    const r = await page.evaluate(
      async ({ email, password }) => {
        const { createClient } = (window as W).plinth;
        const url = (window as W).client.url;
        const key = (window as W).client.anonKey;
        const c = createClient(url, key, { auth: { storageKey: 'race' } });
        const seen: string[] = [];
        c.auth.onAuthStateChange((e: string) => seen.push(e));
        c.auth.stopAutoRefresh();
        const { data } = await c.auth.signInWithPassword({ email, password });
        // A second client on the same storage (say, another module of the page).
        const c2 = createClient(url, key, { auth: { storageKey: 'race' } });
        const seen2: string[] = [];
        c2.auth.onAuthStateChange((e: string) => seen2.push(e));
        c2.auth.stopAutoRefresh();
        await c2.auth.ready;
        // Wait until the token is due (60 s before expiry), then let everything at once want it.
        await new Promise<void>((resolve) => {
          const tick = () => (Date.now() / 1000 >= data.session.expires_at - 60 ? resolve() : setTimeout(tick, 50));
          tick();
        });
        c.auth.startAutoRefresh();
        c2.auth.startAutoRefresh();
        const calls = await Promise.all([c.auth.getUser(), c.auth.getUser(), c.auth.getUser(), c.auth.getSession(), c2.auth.getUser(), c2.auth.getSession()]);
        c.auth.stopAutoRefresh();
        c2.auth.stopAutoRefresh();
        const t1 = (await c.auth.getSession()).data.session.access_token;
        const t2 = (await c2.auth.getSession()).data.session.access_token;
        return { seen, seen2, ok: calls.every((u: any) => u.error === null), same: t1 === t2, fresh: t1 !== data.session.access_token };
      },
      { email, password: PASSWORD },
    );
    t.ok(r.ok);
    t.same(r.seen, ['SIGNED_IN', 'TOKEN_REFRESHED'], 'one refresh for four racing calls');
    t.same(r.seen2, ['TOKEN_REFRESHED'], 'the second client adopted it: no replay, no SIGNED_OUT');
    t.ok(r.same && r.fresh, 'both hold the new token');
    t.equal(refreshes.length, 1, 'one refresh request in all');
    await page.close();
  });

  await t.test('a replayed refresh token ends the session with SIGNED_OUT', async (t) => {
    const page = await openPage(ctx, site.origin);
    // Someone else uses the tab's refresh token first: it is rotated, so the tab's own
    // refresh 60 s before expiry (5 s after sign-in here) replays it. The thief's call goes
    // out the moment the sign-in resolves, from the page itself: a round trip back to the
    // test first could, on a loaded machine, come after the tab's own refresh.
    const thief = await page.evaluate(
      async ({ email, password, k }) => {
        await (window as W).client.auth.signInWithPassword({ email, password });
        const token = JSON.parse(sessionStorage.getItem(k)!).refresh_token as string;
        const r = await fetch('/auth/v1/token', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ grant_type: 'refresh_token', refresh_token: token }),
        });
        return { status: r.status, body: await r.json() };
      },
      { email, password: PASSWORD, k: KEY },
    );
    t.equal(thief.status, 200);
    const out = await until(page, () => (window as W).events.find((e: any) => e.event === 'SIGNED_OUT'), 30_000);
    t.equal(out.token, null);
    t.same((await events(page)).map((e) => e.event), ['SIGNED_IN', 'SIGNED_OUT'], 'no TOKEN_REFRESHED');
    t.equal(await page.evaluate((k) => sessionStorage.getItem(k), KEY), null, 'session removed');
    const stolen = await refresh(app, thief.body.refresh_token);
    t.equal(stolen.status, 401, 'the whole family is revoked');
    const sent: string[] = [];
    page.on('request', (r) => sent.push(r.url()));
    const user = await page.evaluate(async () => (await (window as W).client.auth.getUser()).error?.message);
    t.equal(user, 'not signed in');
    t.notOk(sent.some((u) => u.includes('/auth/v1/')), 'signed out: getUser sends nothing');
    await page.close();
  });

  await t.test('updateUser emits USER_UPDATED; signOut ends the family and emits SIGNED_OUT', async (t) => {
    const page = await openPage(ctx, site.origin);
    const r = await page.evaluate(
      async ({ email, password, k }) => {
        const c = (window as W).client;
        await c.auth.signInWithPassword({ email, password });
        const refreshToken = JSON.parse(sessionStorage.getItem(k)!).refresh_token;
        const upd = await c.auth.updateUser({ data: { plan: 'pro' } });
        const stored = JSON.parse(sessionStorage.getItem(k)!).user.user_metadata;
        const out = await c.auth.signOut();
        return { meta: upd.data.user.user_metadata, stored, outError: out.error, refreshToken, after: sessionStorage.getItem(k) };
      },
      { email, password: PASSWORD, k: KEY },
    );
    t.same(r.meta, { name: 'Ada', plan: 'pro' });
    t.same(r.stored, { name: 'Ada', plan: 'pro' }, 'stored user updated');
    t.equal(r.outError, null);
    t.equal(r.after, null);
    t.same((await events(page)).map((e) => e.event), ['SIGNED_IN', 'USER_UPDATED', 'SIGNED_OUT']);
    const dead = await refresh(app, r.refreshToken);
    t.equal(dead.status, 401, 'logout revoked the refresh token');
    await page.close();
  });

  await t.test('magic link: the session arrives in the URL fragment, which is cleared', async (t) => {
    const page = await openPage(ctx, site.origin);
    const sent = await page.evaluate(async (email) => {
      const { data, error } = await (window as W).client.auth.signInWithOtp({ email });
      return { error, session: data?.session ?? null };
    }, email);
    t.equal(sent.error, null);
    t.equal(sent.session, null);
    const mail = await smtp.next(email, 20_000);
    const [link] = linksOf(mail.text);
    t.match(link, /\/auth\/v1\/magiclink\/verify\?token=/);
    await page.goto(link);
    await waitForClient(page);
    const landed = await until(page, () => (window as W).events.find((e: any) => e.event === 'SIGNED_IN'));
    t.ok(landed.token);
    const after = await page.evaluate(async (k) => ({
      hash: location.hash,
      href: location.href,
      stored: !!sessionStorage.getItem(k),
      email: (await (window as W).client.auth.getUser()).data?.user?.email,
    }), KEY);
    t.equal(after.hash, '', 'fragment cleared');
    t.equal(after.href, site.origin + '/');
    t.ok(after.stored);
    t.equal(after.email, email);
    await page.close();
  });

  await t.test('OAuth: signInWithOAuth goes to the provider and back with a session', async (t) => {
    const oauthEmail = uniqueEmail('oauth');
    oidc.next = { account: { email: oauthEmail, email_verified: true } };
    const page = await openPage(ctx, site.origin);
    const url = await page.evaluate(() => {
      const c = (window as W).client;
      return c.auth.signInWithOAuth({ provider: 'oidc', options: { skipBrowserRedirect: true } }).then((r: any) => r.data.url);
    });
    t.equal(url, `${app.url}/auth/v1/authorize?provider=oidc`);
    await Promise.all([
      page.waitForURL(`${site.origin}/`, { timeout: 20_000 }),
      page.evaluate(() => (window as W).client.auth.signInWithOAuth({ provider: 'oidc' })),
    ]);
    await waitForClient(page);
    await until(page, () => (window as W).events.find((e: any) => e.event === 'SIGNED_IN'));
    const who = await page.evaluate(async () => ({ hash: location.hash, user: (await (window as W).client.auth.getUser()).data?.user }));
    t.equal(who.hash, '');
    t.equal(who.user.email, oauthEmail);
    t.equal(who.user.provider, 'oidc');

    // A refused sign-in comes back as an error in the fragment: getSession reports it once.
    await page.goto(`${site.origin}/index.html#error=access_denied&error_description=the+user+said+no`);
    await waitForClient(page);
    const denied = await page.evaluate(async () => {
      const c = (window as W).client;
      const first = await c.auth.getSession();
      const second = await c.auth.getSession();
      return { hash: location.hash, error: first.error && { message: first.error.message, status: first.error.status }, second: second.error };
    });
    t.same(denied, { hash: '', error: { message: 'the user said no', status: 400 }, second: null });
    await page.close();
  });

  await t.test('password recovery: the emailed link opens the app, which sets the new password', async (t) => {
    const page = await openPage(ctx, site.origin);
    await page.evaluate((email) => (window as W).client.auth.resetPasswordForEmail(email), email);
    const mail = await smtp.next(email, 20_000);
    const [link] = linksOf(mail.text);
    t.equal(new URL(link).origin + new URL(link).pathname, `${site.origin}/reset-password`);
    tokenOfLink(link);
    await page.goto(link);
    await waitForClient(page);
    const r = await page.evaluate(async (email) => {
      const c = (window as W).client;
      const token = new URLSearchParams(location.search).get('token');
      const done = await c.auth.verifyOtp({ type: 'recovery', token, password: 'a brand new password' });
      const again = await c.auth.verifyOtp({ type: 'recovery', token, password: 'a brand new password' });
      const signIn = await c.auth.signInWithPassword({ email, password: 'a brand new password' });
      return { done: done.error, again: again.error && again.error.message, signedIn: !!signIn.data?.session };
    }, email);
    t.same(r, { done: null, again: 'invalid or expired token', signedIn: true });
    await page.close();
  });
}
