/// <reference lib="dom" />
/**
 * The client library's `auth.mfa` in a real browser: enrol a TOTP factor, read the
 * assurance level, verify a code (computed here by the `otpauth` library from the secret
 * the page was given) and see the session raised to aal2 with MFA_CHALLENGE_VERIFIED, list
 * the factors, refuse a reused code, and unenrol.
 */
import t from 'tap';
import * as OTPAuth from 'otpauth';
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
  const app = await startApp(t, { env: { SITE_URL: site.origin, AUTH_RATE_LIMIT: '0' } });
  site.app = { url: app.url, anonKey: app.anonKey };
  const ctx = await launch(t);
  const page = await openPage(ctx, site.origin);
  const email = uniqueEmail('browser-mfa');

  const enrolled = await page.evaluate(
    async ({ email, password }) => {
      const c = (window as W).client;
      await c.auth.signUp({ email, password });
      const before = (await c.auth.mfa.getAuthenticatorAssuranceLevel()).data;
      const { data, error } = await c.auth.mfa.enroll({ factorType: 'totp', friendlyName: 'phone' });
      const img = new Image();
      const loaded = await new Promise<boolean>((resolve) => {
        img.onload = () => resolve(true);
        img.onerror = () => resolve(false);
        img.src = data.totp.qr_code;
      });
      return { before, data, error, loaded, width: img.naturalWidth };
    },
    { email, password: PASSWORD },
  );

  await t.test('enrol: a factor with a QR code the browser renders', async (t) => {
    t.equal(enrolled.error, null);
    t.same(enrolled.before, { currentLevel: 'aal1', nextLevel: 'aal1', currentAuthenticationMethods: [{ method: 'password', timestamp: enrolled.before.currentAuthenticationMethods[0].timestamp }] });
    t.equal(enrolled.data.type, 'totp');
    t.equal(enrolled.data.friendly_name, 'phone');
    t.ok(enrolled.loaded && enrolled.width > 0, 'the SVG data URI is an image');
  });

  const totp = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(enrolled.data.totp.secret), digits: 6, period: 30, algorithm: 'SHA1' });
  const code = totp.generate();

  await t.test('verify: the session becomes aal2 and MFA_CHALLENGE_VERIFIED is emitted', async (t) => {
    const r = await page.evaluate(
      async ({ factorId, code }) => {
        const c = (window as W).client;
        const { data, error } = await c.auth.mfa.challengeAndVerify({ factorId, code });
        const session = (await c.auth.getSession()).data.session;
        const level = (await c.auth.mfa.getAuthenticatorAssuranceLevel()).data;
        const factors = (await c.auth.mfa.listFactors()).data;
        return { error, token: data?.access_token, stored: session?.access_token, level, factors, events: (window as W).events.map((e: W) => e.event) };
      },
      { factorId: enrolled.data.id, code },
    );
    t.equal(r.error, null);
    t.equal(payload(r.token).aal, 'aal2', 'the returned session is aal2');
    t.equal(r.stored, r.token, 'and is the current session');
    t.same([r.level.currentLevel, r.level.nextLevel], ['aal2', 'aal2']);
    t.same(r.level.currentAuthenticationMethods.map((m: { method: string }) => m.method), ['password', 'totp']);
    t.same(r.factors.totp.map((f: { id: string; status: string }) => [f.id, f.status]), [[enrolled.data.id, 'verified']]);
    t.same(r.events, ['SIGNED_IN', 'MFA_CHALLENGE_VERIFIED']);
  });

  await t.test('a code is used once; unenrol removes the factor', async (t) => {
    const r = await page.evaluate(
      async ({ factorId, code }) => {
        const c = (window as W).client;
        const reuse = await c.auth.mfa.challengeAndVerify({ factorId, code });
        const un = await c.auth.mfa.unenroll({ factorId });
        const after = (await c.auth.mfa.listFactors()).data;
        return { reuse: reuse.error && { message: reuse.error.message, status: reuse.error.status }, un, after };
      },
      { factorId: enrolled.data.id, code },
    );
    t.same(r.reuse, { message: 'invalid code', status: 400 });
    t.same(r.un, { data: { id: enrolled.data.id }, error: null });
    t.same(r.after, { all: [], totp: [] });
  });
}
