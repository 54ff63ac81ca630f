/**
 * Passkeys through supabase-js's own `auth.passkey` (auth-js) against plinth under
 * SUPABASE_COMPAT=true, with the software authenticator (passkey-authenticator.ts) standing
 * in for navigator.credentials: GoTrue's paths, bodies, session and error codes.
 */
import t from 'tap';
import { createClient } from '@supabase/supabase-js';
import { PASSWORD, jwtPayload, startAuthApp, uniqueEmail } from './helpers.ts';
import { create, get } from './passkey-authenticator.ts';

const SITE = 'http://localhost:5173';
const app = await startAuthApp(t, { env: { SUPABASE_COMPAT: 'true', SITE_URL: SITE, AUTH_RATE_LIMIT: '0' } });
const supabase = createClient(app.url, app.anonKey, { auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false } });

t.test('register, sign in, list and delete with supabase.auth.passkey', async (t) => {
  const up = await supabase.auth.signUp({ email: uniqueEmail('sb-passkey'), password: PASSWORD });
  t.equal(up.error, null);
  const userId = up.data.user!.id;

  const start = await supabase.auth.passkey.startRegistration();
  t.equal(start.error, null);
  const { credential, response } = create(start.data!.options as never, SITE);
  const verified = await supabase.auth.passkey.verifyRegistration({ challengeId: start.data!.challenge_id, credential: response as never });
  t.equal(verified.error, null);
  t.match(verified.data, { id: /^[0-9a-f-]{36}$/, created_at: String });
  const list = await supabase.auth.passkey.list();
  t.same(list.data?.map((p) => p.id), [verified.data!.id]);

  await supabase.auth.signOut();
  const auth = await supabase.auth.passkey.startAuthentication();
  t.equal(auth.error, null);
  const assertion = get(auth.data!.options as never, SITE, credential, { counter: 1 });
  const signedIn = await supabase.auth.passkey.verifyAuthentication({ challengeId: auth.data!.challenge_id, credential: assertion as never });
  t.equal(signedIn.error, null);
  t.equal(signedIn.data?.user?.id, userId);
  const session = (await supabase.auth.getSession()).data.session;
  t.equal(session?.access_token, signedIn.data?.session?.access_token, 'auth-js keeps the session');
  t.same((jwtPayload(session!.access_token).amr as { method: string }[]).map((m) => m.method), ['passkey']);

  const replay = await supabase.auth.passkey.verifyAuthentication({ challengeId: auth.data!.challenge_id, credential: assertion as never });
  t.match(replay.error, { status: 400, code: 'webauthn_challenge_not_found' }, 'a replay: GoTrue\'s code');

  const del = await supabase.auth.passkey.delete({ passkeyId: verified.data!.id });
  t.equal(del.error, null);
  t.same((await supabase.auth.passkey.list()).data, []);
});
