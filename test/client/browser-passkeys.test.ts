/// <reference lib="dom" />
/**
 * Passkeys in a real browser: headless Chromium with a virtual authenticator (the DevTools
 * protocol's WebAuthn domain: CTAP2, internal transport, resident keys, user verification),
 * a page on http://localhost:<port> (a secure context; SITE_URL, so the RP id is `localhost`
 * and the origin SITE_URL's). Through the client library the page registers a passkey on a
 * signed-in account, signs out, signs in with it (no address typed: a discoverable
 * credential), lists, renames and deletes it; a deleted passkey signs no one in.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, uniqueEmail } from '../auth/helpers.ts';
import { chromiumMissing, launch, openPage, startPages } from './browser.ts';

type W = any;

const missing = chromiumMissing();
if (missing) {
  t.plan(0, missing);
} else {
  await run();
}

function payload(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8')) as Record<string, unknown>;
}

async function run() {
  const [site] = await startPages(t, 1);
  // localhost, not 127.0.0.1: an IP address cannot be a WebAuthn RP id.
  const origin = site.origin.replace('127.0.0.1', 'localhost');
  const app = await startApp(t, { env: { SITE_URL: origin, AUTH_RATE_LIMIT: '0' } });
  site.app = { url: app.url, anonKey: app.anonKey };
  const ctx = await launch(t);
  const page = await openPage(ctx, origin);
  const cdp = await ctx.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
  const email = uniqueEmail('browser-passkey');

  const registered = await page.evaluate(
    async ({ email, password }) => {
      const c = (window as W).client;
      const up = await c.auth.signUp({ email, password });
      const r = await c.auth.registerPasskey({ friendlyName: 'this browser' });
      const list = await c.auth.passkey.list();
      return { userId: up.data.user.id, data: r.data, error: r.error, list: list.data };
    },
    { email, password: PASSWORD },
  );

  await t.test('register: the virtual authenticator makes a resident credential the service keeps', async (t) => {
    t.equal(registered.error, null);
    t.match(registered.data, { id: /^[0-9a-f-]{36}$/, friendly_name: 'this browser' });
    t.same(registered.list.map((p: { id: string }) => p.id), [registered.data.id]);
    const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    t.equal(credentials.length, 1, 'one credential in the authenticator');
    t.equal(credentials[0].isResidentCredential, true, 'discoverable');
    t.equal(credentials[0].rpId, 'localhost');
    t.equal(Buffer.from(credentials[0].userHandle!, 'base64').toString('utf8'), registered.userId, 'its user handle is the user id');
    const [row] = await app.db.sql`select encode(credential_id, 'base64') as id, transports from auth.passkeys where id = ${registered.data.id}`;
    t.equal(row.id, credentials[0].credentialId, 'the service stored that credential');
    t.same(row.transports, ['internal']);
  });

  await t.test('sign in with it after signing out: a session at aal1 with amr passkey, SIGNED_IN', async (t) => {
    const r = await page.evaluate(async () => {
      const c = (window as W).client;
      await c.auth.signOut();
      const before = (await c.auth.getSession()).data.session;
      (window as W).events.length = 0;
      const { data, error } = await c.auth.signInWithPasskey();
      const stored = (await c.auth.getSession()).data.session;
      return { before, error, token: data?.session?.access_token, user: data?.user?.id, stored: stored?.access_token, events: (window as W).events.map((e: W) => e.event) };
    });
    t.equal(r.before, null, 'signed out first');
    t.equal(r.error, null);
    t.equal(r.user, registered.userId);
    const claims = payload(r.token);
    t.equal(claims.sub, registered.userId);
    t.equal(claims.aal, 'aal1');
    t.same((claims.amr as { method: string }[]).map((m) => m.method), ['passkey']);
    t.equal(r.stored, r.token, 'the current session');
    t.same(r.events, ['SIGNED_IN']);
    const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    const [row] = await app.db.sql`select sign_count, last_used_at from auth.passkeys where id = ${registered.data.id}`;
    t.equal(Number(row.sign_count), credentials[0].signCount, 'the counter the authenticator reached');
    t.ok(row.last_used_at !== null, 'last use recorded');
  });

  await t.test('a second sign-in works (the counter moves on); rename; delete; then no sign-in', async (t) => {
    const r = await page.evaluate(async (id: string) => {
      const c = (window as W).client;
      const again = await c.auth.signInWithPasskey();
      const renamed = await c.auth.passkey.update({ passkeyId: id, friendlyName: 'laptop' });
      const deleted = await c.auth.passkey.delete({ passkeyId: id });
      const list = await c.auth.passkey.list();
      await c.auth.signOut();
      const after = await c.auth.signInWithPasskey();
      return { again: again.error, renamed: renamed.data, deleted: deleted.error, list: list.data, after: after.error && { status: after.error.status, message: after.error.message } };
    }, registered.data.id);
    t.equal(r.again, null, 'signed in again');
    t.equal(r.renamed.friendly_name, 'laptop');
    t.equal(r.deleted, null);
    t.same(r.list, []);
    t.match(r.after, { status: 400, message: 'passkey verification failed' }, 'the authenticator still has it; the service does not');
  });

  await t.test('a cancelled prompt is an error, not a throw', async (t) => {
    await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId });
    const r = await page.evaluate(async () => {
      const c = (window as W).client;
      const ac = new AbortController();
      ac.abort(); // the prompt is refused at once, as when the user cancels it
      const { data, error } = await c.auth.signInWithPasskey({ signal: ac.signal });
      return { data, error: error ? { status: error.status, message: error.message } : null };
    });
    t.equal(r.data, null);
    t.match(r.error, { status: 0, message: /^passkey ceremony failed/ });
  });
}
