/**
 * An admin's second factor (docs/dashboard.md): after the password of an account with a
 * verified TOTP factor, the code from the authenticator (challenge, then verify: an aal2
 * session, which the service-role routes require of such an account); and, for an admin
 * account without one, an offer to enrol one. Over the documented MFA endpoints only.
 */
import { useState } from 'preact/hooks';
import { call, currentSession, setSession } from './api.ts';
import { ErrorLine, Field, useAction } from './ui.tsx';

interface Factor {
  id: string;
  status: string;
  factor_type: string;
}

/** The token answer of a sign-in or a verification. */
export interface TokenAnswer {
  access_token: string;
  refresh_token: string;
  user: { email: string | null; role: string };
}

/** A password sign-in waiting for its second factor. */
export interface Pending {
  token: string;
  email: string;
  factorId: string;
}

/** The verified factor of the account a token belongs to (GET /auth/v1/user lists factors), or null when it has none. */
export async function verifiedFactor(token: string): Promise<string | null> {
  const user = (await call<{ factors?: Factor[] }>('GET', '/auth/v1/user', { token })).data;
  return user.factors?.find((f) => f.status === 'verified' && f.factor_type === 'totp')?.id ?? null;
}

function aalOf(token: string): string | undefined {
  try {
    const claims = JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/'))) as { aal?: string };
    return claims.aal;
  } catch {
    return undefined;
  }
}

/** Open an admin account's session (aal read from its token). */
export function startAccountSession(a: TokenAnswer, email: string): void {
  setSession({ token: a.access_token, refreshToken: a.refresh_token, kind: 'account', email: a.user.email ?? email, aal: aalOf(a.access_token) });
}

/** Challenge a factor with `token` and verify `code`: the aal2 session's answer. */
async function verifyCode(token: string, factorId: string, code: string): Promise<TokenAnswer> {
  const c = await call<{ id: string }>('POST', `/auth/v1/factors/${factorId}/challenge`, { token });
  return (await call<TokenAnswer>('POST', `/auth/v1/factors/${factorId}/verify`, { token, body: { challenge_id: c.data.id, code: code.trim() } })).data;
}

/** The second step of a sign-in: the code from the authenticator app. */
export function SecondFactor({ pending, onCancel }: { pending: Pending; onCancel: () => void }) {
  const [code, setCode] = useState('');
  const action = useAction();
  return (
    <main class="signin">
      <h1>plinth</h1>
      <form
        aria-labelledby="factor-title"
        onSubmit={(e) => {
          e.preventDefault();
          void action.run(async () => startAccountSession(await verifyCode(pending.token, pending.factorId, code), pending.email));
        }}
      >
        <h2 id="factor-title">Second factor</h2>
        <p>This admin account has an authenticator: enter the code it shows now.</p>
        <Field label="Code">
          <input inputMode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required value={code} onInput={(e) => setCode((e.target as HTMLInputElement).value)} />
        </Field>
        <button type="submit" disabled={action.busy}>
          Verify
        </button>{' '}
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </form>
      <ErrorLine error={action.error} />
    </main>
  );
}

interface Enrolment {
  id: string;
  totp: { secret: string; uri: string };
}

/** For an admin account signed in without a second factor: the offer to enrol one. */
export function EnrolOffer() {
  const session = currentSession();
  const [enrolment, setEnrolment] = useState<Enrolment | null>(null);
  const [code, setCode] = useState('');
  const action = useAction();
  if (session?.kind !== 'account' || session.aal === 'aal2') return null;
  return (
    <section class="notice" aria-labelledby="enrol-title">
      <h3 id="enrol-title">This admin account has no second factor</h3>
      {!enrolment ? (
        <>
          <p>Its password alone opens everything here. Enrol an authenticator app: from then on, signing in also asks for its code.</p>
          <button
            type="button"
            disabled={action.busy}
            onClick={() =>
              void action.run(async () => {
                const r = await call<Enrolment>('POST', '/auth/v1/factors', { body: { factor_type: 'totp' } });
                setEnrolment(r.data);
              })
            }
          >
            Enrol an authenticator
          </button>
        </>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void action.run(async () => startAccountSession(await verifyCode(session.token, enrolment.id, code), session.email ?? ''));
          }}
        >
          <p>
            Add this key to the authenticator app (or open the link on the phone that has it), then enter the code it shows.
          </p>
          <Field label="Key">
            <input readOnly value={enrolment.totp.secret} />
          </Field>
          <p>
            <a href={enrolment.totp.uri}>otpauth link</a>
          </p>
          <Field label="Code from the app">
            <input inputMode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required value={code} onInput={(e) => setCode((e.target as HTMLInputElement).value)} />
          </Field>
          <button type="submit" disabled={action.busy}>
            Verify and turn on
          </button>
        </form>
      )}
      <ErrorLine error={action.error} />
    </section>
  );
}
