/**
 * `@supabase/supabase-js` (current 2.x), unchanged, against plinth with SUPABASE_COMPAT=true:
 * sign-up, sign-in, refresh, getUser, updateUser, signInWithOtp + verifyOtp with the code
 * read from a real SMTP receiver, the magic link, recovery with redirectTo, anonymous
 * sign-in, sign-out scopes, TOTP MFA, storage and functions; errors carry GoTrue's codes.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, type SupabaseClient } from '@supabase/supabase-js';
import { TOTP } from 'otpauth';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, jwtPayload, linksOf, startSmtp, uniqueEmail } from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'plinth-compat-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
mkdirSync(join(dir, 'functions', 'hello'), { recursive: true });
writeFileSync(
  join(dir, 'functions', 'hello', 'index.ts'),
  `export default async (req: Request): Promise<Response> => {
  const { name } = await req.json() as { name: string };
  return Response.json({ message: 'hello ' + name, auth: req.headers.get('authorization') !== null });
};
`,
);

const SITE = 'http://app.plinth.test';

/** A mailed link, on the test app's address (API_EXTERNAL_URL names port 0 here). */
function local(appUrl: string, link: string): string {
  const u = new URL(link);
  return appUrl + u.pathname + u.search;
}

/** The 6-digit code of a compat mail. */
function codeOf(text: string): string {
  const m = /code: (\d{6})/.exec(text);
  if (!m) throw new Error(`no code in ${text}`);
  return m[1];
}

t.test('supabase-js against SUPABASE_COMPAT=true', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startApp(t, {
    env: {
      SUPABASE_COMPAT: 'true',
      AUTH_RATE_LIMIT: '0',
      SMTP_URL: smtp.url,
      SITE_URL: SITE,
      ADDITIONAL_REDIRECT_URLS: 'http://localhost:5173/**',
      ALLOW_ANONYMOUS_SIGNIN: 'true',
      FUNCTIONS_DIR: join(dir, 'functions'),
      STORAGE_BACKEND: 'disk',
      STORAGE_DIR: join(dir, 'files'),
    },
  });
  const client = (): SupabaseClient =>
    createClient(app.url, app.anonKey, { auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false } });

  t.test('sign-up, sign-in, refresh, getUser, updateUser, sign-out', async (t) => {
    const sb = client();
    const email = uniqueEmail('sb');
    const up = await sb.auth.signUp({ email, password: PASSWORD, options: { data: { name: 'Ada' } } });
    t.equal(up.error, null, 'signUp');
    t.equal(up.data.user?.email, email);
    t.equal(up.data.user?.aud, 'authenticated');
    t.same(up.data.user?.app_metadata, { provider: 'email', providers: ['email'] });
    t.equal(up.data.user?.user_metadata.name, 'Ada');
    t.equal(up.data.user?.identities?.[0]?.provider, 'email');
    t.equal(up.data.user?.is_anonymous, false);
    t.type(up.data.session?.expires_at, 'number', 'expires_at');

    const dup = await sb.auth.signUp({ email, password: PASSWORD });
    t.equal(dup.error?.code, 'user_already_exists', 'signUp twice: user_already_exists');

    const bad = await sb.auth.signInWithPassword({ email, password: 'wrong password!' });
    t.equal(bad.error?.code, 'invalid_credentials');
    t.equal(bad.error?.message, 'Invalid login credentials');
    t.equal(bad.error?.status, 400);

    const weak = await client().auth.signUp({ email: uniqueEmail('weak'), password: 'short' });
    t.equal(weak.error?.code, 'weak_password');

    const si = await sb.auth.signInWithPassword({ email, password: PASSWORD });
    t.equal(si.error, null, 'signInWithPassword (grant_type in the query)');
    const first = si.data.session!;
    const me = await sb.auth.getUser();
    t.equal(me.error, null, 'getUser');
    t.equal(me.data.user?.id, up.data.user?.id);
    t.ok(me.data.user?.last_sign_in_at, 'last_sign_in_at');

    const rf = await sb.auth.refreshSession();
    t.equal(rf.error, null, 'refreshSession (grant_type=refresh_token in the query)');
    t.not(rf.data.session?.refresh_token, first.refresh_token, 'rotated');
    const reused = await client().auth.refreshSession({ refresh_token: first.refresh_token });
    t.equal(reused.error?.code, 'refresh_token_already_used', 'a rotated token again: refresh_token_already_used');

    const upd = await sb.auth.updateUser({ data: { name: 'Ada L.' } });
    t.equal(upd.error, null, 'updateUser (PUT)');
    t.equal(upd.data.user?.user_metadata.name, 'Ada L.');
    const pw = await sb.auth.updateUser({ password: 'another good password' });
    t.equal(pw.error, null, 'updateUser password');
    t.equal((await client().auth.signInWithPassword({ email, password: 'another good password' })).error, null, 'the new password signs in');

    const out = await sb.auth.signOut();
    t.equal(out.error, null, 'signOut (scope=global)');
    t.equal((await client().auth.refreshSession({ refresh_token: rf.data.session!.refresh_token })).error?.code, 'refresh_token_not_found', 'global: the family ended');
  });

  t.test('signOut scope others keeps the caller', async (t) => {
    const email = uniqueEmail('scope');
    const a = client();
    await a.auth.signUp({ email, password: PASSWORD });
    const b = client();
    const bs = (await b.auth.signInWithPassword({ email, password: PASSWORD })).data.session!;
    const as = (await a.auth.getSession()).data.session!;
    t.equal((await a.auth.signOut({ scope: 'others' })).error, null);
    t.equal((await client().auth.refreshSession({ refresh_token: bs.refresh_token })).error?.code, 'refresh_token_not_found', 'the other session ended');
    t.equal((await client().auth.refreshSession({ refresh_token: as.refresh_token })).error, null, 'the caller stays');
  });

  t.test('signInWithOtp + verifyOtp with the mailed code; the magic link of the same mail', async (t) => {
    const sb = client();
    const email = uniqueEmail('otp');
    const r = await sb.auth.signInWithOtp({ email, options: { data: { plan: 'free' } } });
    t.equal(r.error, null, 'signInWithOtp creates the user');
    const mail = await smtp.next(email);
    const links = linksOf(mail.text);
    t.equal(links.length, 1, 'one link');
    const code = codeOf(mail.text);
    const wrong = await sb.auth.verifyOtp({ email, token: code === '000000' ? '111111' : '000000', type: 'email' });
    t.equal(wrong.error?.code, 'otp_expired', 'a wrong code');
    const v = await sb.auth.verifyOtp({ email, token: code, type: 'email' });
    t.equal(v.error, null, 'verifyOtp');
    t.equal(v.data.user?.email, email);
    t.equal(v.data.user?.user_metadata.plan, 'free');
    t.ok(v.data.user?.email_confirmed_at, 'confirmed');
    t.equal((await sb.auth.getUser()).data.user?.email, email, 'signed in');
    // The code spent the link of the same mail.
    const spent = await fetch(local(app.url, links[0]), { redirect: 'manual' });
    t.match(spent.headers.get('location'), /#error=access_denied&error_code=otp_expired/);

    const none = await client().auth.signInWithOtp({ email: uniqueEmail('none'), options: { shouldCreateUser: false } });
    t.equal(none.error?.code, 'otp_disabled', 'shouldCreateUser false: an unknown address is refused');

    // The link: 303 to the redirect with the session in the fragment.
    t.equal((await client().auth.signInWithOtp({ email, options: { emailRedirectTo: 'http://localhost:5173/welcome' } })).error, null);
    const link = linksOf((await smtp.next(email)).text)[0];
    t.match(link, /\/auth\/v1\/verify\?token=.+&type=magiclink&redirect_to=/);
    const res = await fetch(local(app.url, link), { redirect: 'manual' });
    t.equal(res.status, 303);
    const location = res.headers.get('location')!;
    t.match(location, /^http:\/\/localhost:5173\/welcome#access_token=/);
    const f = new URLSearchParams(location.split('#')[1]);
    t.equal(f.get('type'), 'magiclink');
    const s2 = client();
    const set = await s2.auth.setSession({ access_token: f.get('access_token')!, refresh_token: f.get('refresh_token')! });
    t.equal(set.error, null, 'the fragment is a session');
    t.equal(set.data.user?.email, email);

    const refused = await client().auth.signInWithOtp({ email, options: { emailRedirectTo: 'https://evil.example/' } });
    t.equal(refused.error?.status, 400, 'a redirect outside SITE_URL and ADDITIONAL_REDIRECT_URLS is refused');
  });

  t.test('recovery with redirectTo: PASSWORD_RECOVERY, then updateUser', async (t) => {
    const email = uniqueEmail('rec');
    await client().auth.signUp({ email, password: PASSWORD });
    const sb = client();
    t.equal((await sb.auth.resetPasswordForEmail(email, { redirectTo: `${SITE}/reset` })).error, null);
    const mail = await smtp.next(email);
    const link = linksOf(mail.text)[0];
    t.match(link, /type=recovery/);
    const res = await fetch(local(app.url, link), { redirect: 'manual' });
    const location = res.headers.get('location')!;
    t.match(location, new RegExp(`^${SITE}/reset#access_token=`));
    const f = new URLSearchParams(location.split('#')[1]);
    t.equal(f.get('type'), 'recovery', 'type=recovery: detectSessionInUrl fires PASSWORD_RECOVERY');
    await sb.auth.setSession({ access_token: f.get('access_token')!, refresh_token: f.get('refresh_token')! });
    t.equal((await sb.auth.updateUser({ password: 'a brand new password' })).error, null);
    t.equal((await client().auth.signInWithPassword({ email, password: 'a brand new password' })).error, null);

    // The code of a recovery mail works too.
    const sb2 = client();
    await sb2.auth.resetPasswordForEmail(email);
    let mail2 = await smtp.next(email);
    if (mail2.subject !== 'Reset your password') mail2 = await smtp.next(email); // the notice of the password change came first
    const v = await sb2.auth.verifyOtp({ email, token: codeOf(mail2.text), type: 'recovery' });
    t.equal(v.error, null, 'verifyOtp type recovery');
    t.equal(jwtPayload(v.data.session!.access_token).sub, v.data.user?.id);
  });

  t.test('anonymous sign-in', async (t) => {
    const sb = client();
    const r = await sb.auth.signInAnonymously({ options: { data: { theme: 'dark' } } });
    t.equal(r.error, null, 'signInAnonymously');
    t.equal(r.data.user?.is_anonymous, true);
    t.same(r.data.user?.identities, []);
    t.equal(r.data.user?.user_metadata.theme, 'dark');
    t.equal(jwtPayload(r.data.session!.access_token).is_anonymous, true);
  });

  t.test('TOTP MFA', async (t) => {
    const sb = client();
    await sb.auth.signUp({ email: uniqueEmail('mfa'), password: PASSWORD });
    const en = await sb.auth.mfa.enroll({ factorType: 'totp', friendlyName: 'phone' });
    t.equal(en.error, null, 'enroll');
    const totp = new TOTP({ secret: en.data!.totp.secret });
    const cv = await sb.auth.mfa.challengeAndVerify({ factorId: en.data!.id, code: totp.generate() });
    t.equal(cv.error, null, 'challengeAndVerify');
    const aal = await sb.auth.mfa.getAuthenticatorAssuranceLevel();
    t.equal(aal.data?.currentLevel, 'aal2');
    const lf = await sb.auth.mfa.listFactors();
    t.equal(lf.data?.totp.length, 1, 'listFactors reads the user\'s factors');
    const ch = await sb.auth.mfa.challenge({ factorId: en.data!.id });
    const bad = await sb.auth.mfa.verify({ factorId: en.data!.id, challengeId: ch.data!.id, code: '000000' });
    t.equal(bad.error?.code, 'mfa_verification_failed');
  });

  t.test('REST errors as postgrest-js reads them', async (t) => {
    await app.db.sql.unsafe(`create table public.pets (id int primary key, name text unique not null);
      grant select, insert on public.pets to anon, authenticated; insert into public.pets values (1, 'Rex');`).simple();
    t.equal((await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey })).status, 200);
    const sb = client();
    const one = await sb.from('pets').select('id, name').eq('id', 1).single();
    t.same([one.error, one.data], [null, { id: 1, name: 'Rex' }], '.single() with one row');
    const none = await sb.from('pets').select('id').eq('id', 99).single();
    t.equal(none.error?.code, 'PGRST116', '.single() with no row: PGRST116');
    t.equal(none.status, 406);
    const maybe = await sb.from('pets').select('id').eq('id', 99).maybeSingle();
    t.same([maybe.error, maybe.data], [null, null], '.maybeSingle() with no row');
    const dup = await sb.from('pets').insert({ id: 2, name: 'Rex' });
    t.equal(dup.error?.code, '23505', 'a duplicate: 23505');
    t.notMatch(JSON.stringify(dup.error), /Rex/, 'no value of the row in the error');
    const col = await sb.from('pets').insert({ id: 3, nope: 1 });
    t.equal(col.error?.code, 'PGRST204', 'an unknown column: PGRST204');
    const denied = await sb.from('secret_pets_that_do_not_exist').select();
    t.equal(denied.error?.code, 'PGRST205', 'an unknown table: PGRST205');
  });

  t.test('storage and functions', async (t) => {
    const admin = createClient(app.url, app.serviceKey, { auth: { persistSession: false, autoRefreshToken: false } });
    t.equal((await admin.storage.createBucket('docs', { public: false })).error, null, 'createBucket');
    const sb = client();
    await sb.auth.signUp({ email: uniqueEmail('st'), password: PASSWORD });
    const up = await admin.storage.from('docs').upload('a/hello.txt', Buffer.from('hello'), { contentType: 'text/plain' });
    t.equal(up.error, null, 'upload');
    t.equal(await (await admin.storage.from('docs').download('a/hello.txt')).data?.text(), 'hello', 'download');
    const signed = await admin.storage.from('docs').createSignedUrl('a/hello.txt', 60);
    t.equal(await (await fetch(signed.data!.signedUrl)).text(), 'hello', 'signed URL');
    const missing = await admin.storage.from('docs').download('nope.txt');
    t.ok(missing.error, 'a missing object is an error');

    await app.db.sql`insert into edge.functions (name, runtime) values ('hello', 'deno')`;
    await admin.functions.invoke('_refresh'); // the catalog reloads at once (it would by NOTIFY too)
    const fn = await sb.functions.invoke('hello', { body: { name: 'Ada' } });
    t.equal(fn.error, null, 'functions.invoke');
    if (fn.error) t.comment(await (fn.error as { context: Response }).context.text());
    t.same(fn.data, { message: 'hello Ada', auth: true });
  });
});
