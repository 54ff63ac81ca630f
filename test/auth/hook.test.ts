/**
 * The custom access-token hook (AUTH_HOOK_CUSTOM_ACCESS_TOKEN): a SQL function of the
 * application that every issued token's claims pass through. One plinth for the file; the
 * hook's behaviour depends on the address of the user signing in.
 */
import t from 'tap';
import * as OTPAuth from 'otpauth';
import { captureLog } from '../helpers/log-capture.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { jwtPayload, PASSWORD, refresh, signIn, startAuthApp, uniqueEmail } from './helpers.ts';
import { REDIRECT_URI, SITE_URL, signInWith } from './oauth/browser.ts';
import { startOidcProvider } from './oauth/fakes.ts';

const db = await createTestDatabase(t);
await db.sql.unsafe(`
  create schema hooks;
  create function hooks.access_token(event jsonb) returns jsonb language plpgsql as $$
  declare
    v_email text := event -> 'claims' ->> 'email';
  begin
    if v_email like 'raise-%' then
      raise exception 'this account is on hold';
    elsif v_email like 'slow-%' then
      perform pg_sleep(30);
    elsif v_email like 'answer-%' then
      return '{"error": {"http_code": 429, "message": "come back tomorrow"}}';
    elsif v_email like 'plain-%' then
      return jsonb_build_object('claims', event -> 'claims');
    elsif v_email like 'forbid-%' then
      return jsonb_build_object('claims', event -> 'claims' || '{"sub": "00000000-0000-4000-8000-000000000000",
        "role": "service_role", "aal": "aal2", "aud": "elsewhere", "exp": 4102444800, "session_id": "x", "plan": "gold",
        "email": "ceo@example.com", "amr": [{"method": "totp", "timestamp": 1}], "is_anonymous": true}');
    end if;
    return jsonb_build_object('claims', (event -> 'claims') || jsonb_build_object(
      'plan', 'gold', 'seen_method', event ->> 'authentication_method', 'seen_user', event ->> 'user_id'));
  end
  $$;
  create table public.gold_notes (id int primary key, body text);
  alter table public.gold_notes enable row level security;
  create policy gold_only on public.gold_notes for select to authenticated using (auth.jwt() ->> 'plan' = 'gold');
  grant select on public.gold_notes to authenticated;
  insert into public.gold_notes values (1, 'for gold members');
  create policy gold_uploads on storage.objects as restrictive for insert to authenticated
    with check (auth.jwt() ->> 'plan' = 'gold');
`);
const { lines, log } = captureLog('info');
const oidc = await startOidcProvider(t, { clientId: 'hook-oidc', clientSecret: 'hook-oidc-secret', redirectUri: REDIRECT_URI, conformIdTokenClaims: true });
const app = await startAuthApp(t, {
  db,
  log,
  env: {
    AUTH_HOOK_CUSTOM_ACCESS_TOKEN: 'hooks.access_token',
    SITE_URL,
    OIDC_CLIENT_ID: 'hook-oidc',
    OIDC_CLIENT_SECRET: 'hook-oidc-secret',
    OIDC_ISSUER_URL: oidc.issuer,
  },
});

/** An account made by the admin API (no token issued), then signed in with its password. */
async function account(prefix: string): Promise<string> {
  const email = uniqueEmail(prefix);
  const r = await app.call('POST', '/auth/v1/admin/users', { token: app.serviceKey, body: { email, password: PASSWORD, email_confirm: true } });
  if (r.status !== 201) throw new Error(`admin create: ${r.status} ${r.text}`);
  return email;
}

t.test('claims added by the hook are signed and reach RLS; every issuing path runs it', async (t) => {
  const email = await account('gold');
  const s = await signIn(app, email);
  t.equal(s.status, 200, 'answered 200', { body: s.text });
  const p = jwtPayload(s.body.access_token);
  t.match(p, { plan: 'gold', seen_method: 'password', seen_user: s.body.user.id, aal: 'aal1', role: 'authenticated', aud: 'authenticated' });
  const notes = await app.call('GET', '/rest/v1/gold_notes?select=body', { token: s.body.access_token });
  t.same(notes.body, [{ body: 'for gold members' }], 'the policy sees the claim');
  const r = await refresh(app, s.body.refresh_token);
  t.equal(r.status, 200);
  t.match(jwtPayload(r.body.access_token), { plan: 'gold', seen_method: 'token_refresh' }, 'a refresh runs the hook');
  const up = await app.call('POST', '/auth/v1/signup', { body: { email: uniqueEmail('signup'), password: PASSWORD } });
  t.match(jwtPayload(up.body.access_token), { plan: 'gold', seen_method: 'password' }, 'a sign-up runs the hook');
  // An MFA verification issues a token too; the hook sees aal2 and cannot lower it.
  const token = up.body.access_token as string;
  const factor = await app.call('POST', '/auth/v1/factors', { token, body: { factor_type: 'totp' } });
  const code = new OTPAuth.TOTP({ secret: OTPAuth.Secret.fromBase32(factor.body.totp.secret) }).generate();
  const challenge = await app.call('POST', `/auth/v1/factors/${factor.body.id}/challenge`, { token });
  const v = await app.call('POST', `/auth/v1/factors/${factor.body.id}/verify`, { token, body: { challenge_id: challenge.body.id, code } });
  t.equal(v.status, 200, 'verified');
  t.match(jwtPayload(v.body.access_token), { plan: 'gold', seen_method: 'totp', aal: 'aal2' }, 'an MFA verification runs the hook');
});

t.test("the hook's claims reach storage's policies", async (t) => {
  const bucket = await app.call('POST', '/storage/v1/bucket', { token: app.serviceKey, body: { name: 'gold-files' } });
  t.equal(bucket.status, 201, 'answered 201', { body: bucket.text });
  const upload = async (token: string) =>
    (await app.fetch('/storage/v1/object/gold-files/' + Math.random().toString(36).slice(2) + '.txt', {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' },
      body: 'hello',
    })).status;
  const gold = await signIn(app, await account('gold'));
  const plain = await signIn(app, await account('plain'));
  t.equal(jwtPayload(plain.body.access_token).plan, undefined, 'the hook added nothing for this one');
  t.equal(await upload(gold.body.access_token), 200, 'a claim the hook added lets the upload through');
  t.equal(await upload(plain.body.access_token), 403, 'without it the policy refuses');
});

t.test('changes to protected claims are refused and logged; the rest is kept', async (t) => {
  const email = await account('forbid');
  const s = await signIn(app, email);
  t.equal(s.status, 200, 'answered 200', { body: s.text });
  const p = jwtPayload(s.body.access_token);
  t.equal(p.sub, s.body.user.id, 'sub kept');
  t.equal(p.role, 'authenticated', 'role kept');
  t.equal(p.aal, 'aal1', 'aal kept');
  t.equal(p.aud, 'authenticated', 'aud kept');
  t.not(p.exp, 4102444800, 'exp kept');
  t.not(p.session_id, 'x', 'session_id kept');
  t.equal(p.plan, 'gold', 'an allowed claim is signed');
  // Policies read these as facts about the account and its sign-in: the hook cannot forge them.
  t.equal(p.email, email, 'email kept');
  t.same((p.amr as { method: string }[]).map((a) => a.method), ['password'], 'amr kept');
  t.equal(p.is_anonymous, false, 'is_anonymous kept');
  const line = lines.find((l) => String(l.msg).includes('may not change'));
  t.ok(line, 'a log line names the refusal');
  t.same([...((line?.refused as string[]) ?? [])].sort(), ['aal', 'amr', 'aud', 'email', 'exp', 'is_anonymous', 'role', 'session_id', 'sub']);
});

t.test('a hook that raises refuses the sign-in with its message', async (t) => {
  const email = await account('raise');
  const s = await signIn(app, email);
  t.same([s.status, s.body], [403, { error: 'this account is on hold' }]);
  const a = await account('answer');
  const r = await signIn(app, a);
  t.same([r.status, r.body], [429, { error: 'come back tomorrow' }], "GoTrue's error answer keeps its 4xx");
});

t.test('OAuth: the hook runs, and its refusal goes back to SITE_URL as a code', async (t) => {
  oidc.next = { account: { email: uniqueEmail('gold'), email_verified: true } };
  const ok = await signInWith(app, 'oidc');
  t.equal(ok.landing.target, SITE_URL);
  t.match(jwtPayload(ok.landing.fragment.get('access_token') ?? ''), { plan: 'gold', seen_method: 'oauth' });
  oidc.next = { account: { email: uniqueEmail('raise'), email_verified: true } };
  const refused = await signInWith(app, 'oidc');
  t.equal(refused.res.status, 302);
  t.same([refused.landing.fragment.get('error'), refused.landing.fragment.get('error_description')], ['access_denied', 'this account is on hold']);
  t.notOk(refused.landing.fragment.has('access_token'), 'no token');
});

t.test('a hook slower than 2 s fails closed, and its statement is cancelled', async (t) => {
  const email = await account('slow');
  const started = Date.now();
  const s = await signIn(app, email);
  t.same([s.status, s.body], [500, { error: 'the access token hook timed out' }]);
  t.ok(Date.now() - started >= 2000, 'not before the limit');
  // No statement of the hook is left running.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const [r] = await db.sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where datname = ${db.name} and query like '%run_access_token_hook%' and state = 'active' and pid <> pg_backend_pid()`;
    if (r.n === 0) break;
    if (Date.now() > deadline) {
      t.fail('the hook statement still runs');
      break;
    }
    await new Promise((res) => setTimeout(res, 100));
  }
  t.pass('the statement ended');
});
