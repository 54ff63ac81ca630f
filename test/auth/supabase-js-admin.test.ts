/**
 * SUPABASE_COMPAT: supabase-js's `auth.admin` with the service-role key, unchanged:
 * createUser (with user_metadata and app_metadata), listUsers (GoTrue's page, total and
 * next/last pages), getUserById, updateUserById, inviteUserByEmail (the real SMTP
 * receiver), generateLink (its hashed_token works with verifyOtp, its action_link opens a
 * session at the redirect), deleteUser. The default mode's list stays plinth's array.
 */
import t from 'tap';
import { createClient } from '@supabase/supabase-js';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, startSmtp, uniqueEmail } from './helpers.ts';

const SITE = 'http://app.plinth.test';

t.test('supabase-js auth.admin against SUPABASE_COMPAT=true', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startApp(t, {
    env: { SUPABASE_COMPAT: 'true', AUTH_RATE_LIMIT: '0', SMTP_URL: smtp.url, SITE_URL: SITE, ADDITIONAL_REDIRECT_URLS: 'http://localhost:5173/**' },
  });
  const opts = { auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false } };
  const admin = createClient(app.url, app.serviceKey, opts).auth.admin;
  const anon = () => createClient(app.url, app.anonKey, opts);

  const email = uniqueEmail('adm');
  const created = await admin.createUser({ email, password: PASSWORD, email_confirm: true, user_metadata: { name: 'Ann' }, app_metadata: { plan: 'pro' } });
  t.equal(created.error, null, 'createUser');
  const id = created.data.user!.id;
  t.equal(created.data.user?.email, email);
  t.equal(created.data.user?.aud, 'authenticated');
  t.same(created.data.user?.user_metadata, { name: 'Ann' });
  t.same(created.data.user?.app_metadata, { plan: 'pro', provider: 'email', providers: ['email'] }, 'app_metadata with the provider');
  t.ok(created.data.user?.email_confirmed_at, 'confirmed');
  const signIn = await anon().auth.signInWithPassword({ email, password: PASSWORD });
  t.equal(signIn.error, null, 'the created user signs in');
  t.equal(signIn.data.session?.user.app_metadata.plan, 'pro');

  const dup = await admin.createUser({ email, password: PASSWORD });
  t.equal(dup.error?.code, 'user_already_exists');

  for (let i = 0; i < 2; i++) t.equal((await admin.createUser({ email: uniqueEmail('adm-page') })).error, null);
  const listed = await admin.listUsers({ page: 1, perPage: 2 });
  t.equal(listed.error, null, 'listUsers');
  const page1 = listed as { data: { users: { id: string; aud: string; identities?: unknown[] }[]; aud: string; total: number; nextPage?: number; lastPage?: number } };
  t.equal(page1.data.users.length, 2, 'a page of 2');
  t.equal(page1.data.aud, 'authenticated');
  t.ok(page1.data.total >= 3, 'the total');
  t.equal(page1.data.nextPage, 2, 'the next page');
  t.equal(page1.data.lastPage, Math.ceil(page1.data.total / 2), 'the last page');
  t.ok(page1.data.users.every((u) => u.aud === 'authenticated' && Array.isArray(u.identities)), 'GoTrue users');
  const all = await admin.listUsers({ perPage: 1000 });
  t.ok(all.data.users.some((u) => u.id === id), 'every user, on one page');
  const bad = await fetch(`${app.url}/auth/v1/admin/users?page=zero`, { headers: { apikey: app.serviceKey, authorization: `Bearer ${app.serviceKey}` } });
  t.equal(bad.status, 400, 'a page that is no number');

  const got = await admin.getUserById(id);
  t.equal(got.error, null, 'getUserById');
  t.equal(got.data.user?.email, email);
  t.equal(got.data.user?.identities?.[0]?.provider, 'email');

  const upd = await admin.updateUserById(id, { user_metadata: { age: 3 }, app_metadata: { plan: 'team' }, ban_duration: '24h' });
  t.equal(upd.error, null, 'updateUserById');
  t.same(upd.data.user?.user_metadata, { name: 'Ann', age: 3 });
  t.equal(upd.data.user?.app_metadata.plan, 'team');
  t.ok((upd.data.user as { banned_until?: string }).banned_until, 'banned_until');
  const banned = await anon().auth.signInWithPassword({ email, password: PASSWORD });
  t.equal(banned.error?.code, 'user_banned', 'a banned user does not sign in');
  t.equal(banned.error?.status, 400);
  await admin.updateUserById(id, { ban_duration: 'none' });

  const invited = uniqueEmail('inv');
  const inv = await admin.inviteUserByEmail(invited, { data: { team: 'x' } });
  t.equal(inv.error, null, 'inviteUserByEmail');
  t.equal(inv.data.user?.email, invited);
  t.ok((inv.data.user as { invited_at?: string }).invited_at, 'invited_at');
  t.ok((await smtp.next(invited)).text.length > 0, 'the invitation is mailed');

  const linked = uniqueEmail('link');
  await admin.createUser({ email: linked, password: PASSWORD, email_confirm: true });
  const gl = await admin.generateLink({ type: 'magiclink', email: linked, options: { redirectTo: 'http://localhost:5173/in' } });
  t.equal(gl.error, null, 'generateLink');
  t.equal(gl.data.user?.email, linked);
  t.equal(gl.data.properties?.verification_type, 'magiclink');
  t.equal(gl.data.properties?.redirect_to, 'http://localhost:5173/in');
  t.match(gl.data.properties?.action_link, /\/auth\/v1\/verify\?token=.+&type=magiclink&redirect_to=/);
  const v = await anon().auth.verifyOtp({ token_hash: gl.data.properties!.hashed_token, type: 'magiclink' });
  t.equal(v.error, null, 'verifyOtp with the hashed_token');
  t.equal(v.data.user?.email, linked);
  const gl2 = await admin.generateLink({ type: 'recovery', email: linked, options: { redirectTo: 'http://localhost:5173/reset' } });
  const u = new URL(gl2.data.properties!.action_link);
  const res = await fetch(app.url + u.pathname + u.search, { redirect: 'manual' });
  t.match(res.headers.get('location'), /^http:\/\/localhost:5173\/reset#access_token=.+type=recovery/, 'the action_link opens a session at the redirect');
  const far = await admin.generateLink({ type: 'magiclink', email: linked, options: { redirectTo: 'https://evil.example/' } });
  t.equal(far.error?.status, 400, 'a redirect outside the allowed ones');

  const del = await admin.deleteUser(id);
  t.equal(del.error, null, 'deleteUser');
  t.equal((await admin.getUserById(id)).error?.status, 404, 'gone');

  const notAdmin = await createClient(app.url, app.anonKey, opts).auth.admin.listUsers();
  t.equal(notAdmin.error?.status, 403, 'the anon key is not an admin');
});

t.test('default mode: the admin list stays plinth\'s array', async (t) => {
  const app = await startApp(t, { env: { AUTH_RATE_LIMIT: '0' } });
  const h = { apikey: app.serviceKey, authorization: `Bearer ${app.serviceKey}`, 'content-type': 'application/json' };
  const email = uniqueEmail('dflt');
  const c = await fetch(`${app.url}/auth/v1/admin/users`, { method: 'POST', headers: h, body: JSON.stringify({ email, user_metadata: { x: 1 } }) });
  t.equal(c.status, 201, 'created: 201');
  const body = (await c.json()) as Record<string, unknown>;
  t.same(body.user_metadata, {}, 'user_metadata ignored');
  t.notOk('aud' in body, 'plinth\'s User');
  const list = await fetch(`${app.url}/auth/v1/admin/users?page=1&per_page=1`, { headers: h });
  t.equal(list.headers.get('x-total-count'), null);
  const users = (await list.json()) as { email: string }[];
  t.ok(Array.isArray(users) && users.some((u) => u.email === email), 'every user, as an array');
});
