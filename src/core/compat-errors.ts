/**
 * Error bodies under SUPABASE_COMPAT=true (docs/api/supabase.md): the same refusal, in the
 * shape the Supabase client of the area reads.
 *
 * - /auth/v1: GoTrue's `{code, error_code, msg}` (auth-js reads `error_code` and `msg`),
 *   with GoTrue's status and code for the refusals it has a code for.
 * - /rest/v1: PostgREST's `{code, message, details, hint}` (postgrest-js reads all four),
 *   `code` the SQLSTATE or PostgREST's `PGRSTnnn`.
 *
 * The message is always plinth's public one (or GoTrue's fixed wording): never database
 * text, never a value of a row. Only the code is added, which names a class of refusal.
 * Every other path keeps plinth's `{"error": …}`.
 */
import type { AppError } from './errors.ts';

export type ErrorShape = 'gotrue' | 'postgrest';

/** The shape of a request's errors under the setting, from its path; null: plinth's own. */
export function errorShapeOf(url: string): ErrorShape | null {
  if (url.startsWith('/auth/v1/')) return 'gotrue';
  if (url.startsWith('/rest/v1/') || url === '/rest/v1') return 'postgrest';
  return null;
}

interface GoTrueError {
  status: number;
  code: string;
  msg: string;
}

/** plinth's public auth messages → GoTrue's status, error code and words. Keyed `status message`. */
const GOTRUE: Record<string, GoTrueError> = {
  '401 invalid email or password': { status: 400, code: 'invalid_credentials', msg: 'Invalid login credentials' },
  '401 invalid refresh token': { status: 400, code: 'refresh_token_not_found', msg: 'Invalid Refresh Token: Refresh Token Not Found' },
  '401 refresh token expired': { status: 400, code: 'session_expired', msg: 'Invalid Refresh Token: Session Expired' },
  '401 refresh token reuse detected — please log in again': {
    status: 400,
    code: 'refresh_token_already_used',
    msg: 'Invalid Refresh Token: Already Used',
  },
  '403 email not verified': { status: 400, code: 'email_not_confirmed', msg: 'Email not confirmed' },
  '404 user not found': { status: 404, code: 'user_not_found', msg: 'User not found' },
  '409 email already registered': { status: 422, code: 'user_already_exists', msg: 'User already registered' },
  '429 too many requests, try again later': { status: 429, code: 'over_request_rate_limit', msg: 'Request rate limit reached' },
  '503 anonymous sign-ins are disabled': { status: 422, code: 'anonymous_provider_disabled', msg: 'Anonymous sign-ins are disabled' },
  '400 invalid or expired token': { status: 403, code: 'otp_expired', msg: 'Token has expired or is invalid' },
  '401 invalid or expired token': { status: 403, code: 'bad_jwt', msg: 'invalid JWT: unable to parse or verify signature, token is expired or invalid' },
  '401 missing credentials': { status: 401, code: 'no_authorization', msg: 'This endpoint requires a Bearer token' },
  '403 service role required': { status: 403, code: 'not_admin', msg: 'User not allowed' },
  '400 invalid request body': { status: 400, code: 'bad_json', msg: 'Could not parse request body as JSON' },
  '400 invalid email address': { status: 400, code: 'email_address_invalid', msg: 'Unable to validate email address: invalid format' },
  '400 invalid code': { status: 422, code: 'mfa_verification_failed', msg: 'Invalid TOTP code entered' },
  '400 challenge expired': { status: 422, code: 'mfa_challenge_expired', msg: 'MFA challenge has expired, verify against another challenge or create a new factor.' },
  '404 factor not found': { status: 404, code: 'mfa_factor_not_found', msg: 'Factor not found' },
  '404 challenge not found': { status: 404, code: 'mfa_factor_not_found', msg: 'Challenge not found' },
  '409 a factor with this friendly name already exists': {
    status: 422,
    code: 'mfa_factor_name_conflict',
    msg: 'A factor with the friendly name already exists',
  },
  '422 Signups not allowed for otp': { status: 422, code: 'otp_disabled', msg: 'Signups not allowed for otp' },
  '400 phone sign-in is not supported': { status: 400, code: 'phone_provider_disabled', msg: 'Phone logins are disabled' },
  '400 phone sign-in is disabled: no send-SMS hook is configured': { status: 400, code: 'phone_provider_disabled', msg: 'Unsupported phone provider' },
  '400 invalid phone number: E.164 required (country code and number, 7 to 15 digits)': {
    status: 400,
    code: 'validation_failed',
    msg: 'Invalid phone number format (E.164 required)',
  },
  '400 redirect_to is not an allowed redirect URL': { status: 400, code: 'validation_failed', msg: 'redirect_to is not an allowed redirect URL' },
  '404 invalid flow state, no valid flow state found': { status: 404, code: 'flow_state_not_found', msg: 'invalid flow state, no valid flow state found' },
  '422 invalid flow state, flow state has expired': { status: 422, code: 'flow_state_expired', msg: 'invalid flow state, flow state has expired' },
  '400 code challenge does not match previously saved code verifier': {
    status: 400,
    code: 'bad_code_verifier',
    msg: 'code challenge does not match previously saved code verifier',
  },
  '403 user is banned': { status: 400, code: 'user_banned', msg: 'User is banned' },
  '422 too many factors': { status: 422, code: 'too_many_enrolled_mfa_factors', msg: 'Maximum number of verified factors reached' },
  // Passkeys (src/auth/flows/passkeys.ts): GoTrue's codes and words.
  '400 passkey challenge not found or already used': { status: 400, code: 'webauthn_challenge_not_found', msg: 'Challenge not found or already used' },
  '400 passkey challenge expired': { status: 400, code: 'webauthn_challenge_expired', msg: 'Challenge has expired' },
  '400 passkey verification failed': { status: 400, code: 'webauthn_verification_failed', msg: 'Credential verification failed' },
  '409 passkey already registered': { status: 422, code: 'webauthn_credential_exists', msg: 'This credential is already registered' },
  '422 too many passkeys': { status: 422, code: 'too_many_passkeys', msg: 'Maximum number of passkeys reached' },
  '404 passkey not found': { status: 404, code: 'validation_failed', msg: 'Passkey not found' },
  '403 guests cannot register passkeys': { status: 403, code: 'no_authorization', msg: 'Anonymous user not allowed to perform these actions' },
};

/** The code of a refusal GoTrue has no fixed wording for, from its status and message. */
function gotrueCode(err: AppError): string {
  const m = err.publicMessage;
  if (m.startsWith('password must be')) return 'weak_password';
  if (m.includes('(aal2)') || m === 'insufficient_aal') return 'insufficient_aal'; // the latter: main's new aal2 rule for email and password changes
  if (m.includes('redirect')) return 'validation_failed';
  if (err.status === 404) return 'not_found';
  if (err.status === 429) return 'over_request_rate_limit';
  if (err.status >= 500) return 'unexpected_failure';
  return 'validation_failed';
}

/** A body in GoTrue's shape, and its status. */
export function gotrueBody(err: AppError, path: string): { status: number; body: Record<string, unknown> } {
  const known = GOTRUE[`${err.status} ${err.publicMessage}`];
  if (known !== undefined) {
    // PUT /user (or an email change's /verify) with a taken address: GoTrue's email_exists, not the sign-up's code.
    const taken = path.startsWith('/auth/v1/user') || path.startsWith('/auth/v1/verify');
    const code = known.code === 'user_already_exists' && taken ? 'email_exists' : known.code;
    return { status: known.status, body: { code: known.status, error_code: code, msg: known.msg } };
  }
  const code = gotrueCode(err);
  const status = code === 'weak_password' ? 422 : err.status;
  const body: Record<string, unknown> = { code: status, error_code: code, msg: err.publicMessage };
  if (code === 'weak_password') body.weak_password = { reasons: ['length'] };
  return { status, body };
}

interface PostgrestError {
  code: string;
  status?: number;
}

/** plinth's public REST messages → PostgREST's code (and status where it differs). */
const POSTGREST: Record<string, PostgrestError> = {
  'relation not found': { code: 'PGRST205' },
  'function not found': { code: 'PGRST202' },
  'JSON object requested, multiple (or no) rows returned': { code: 'PGRST116' },
  'only the public schema is exposed': { code: 'PGRST106' },
  'method not allowed': { code: 'PGRST117' },
  'more rows affected than Prefer: max-affected allows': { code: 'PGRST124' },
  'none of the accepted media types can be produced': { code: 'PGRST107' },
  'invalid request body': { code: 'PGRST102' },
  'request body too large': { code: 'PGRST102' },
  'missing credentials': { code: 'PGRST302' },
  'invalid or expired token': { code: 'PGRST301' },
  'database busy': { code: 'PGRST003' },
  'database unavailable': { code: 'PGRST001' },
  'not found': { code: 'PGRST125' },
};

const SQLSTATE = /^[0-9A-Z]{5}$/;

function postgrestCode(err: AppError, method: string): string {
  const cause = err.cause as { code?: unknown } | undefined;
  const m = err.publicMessage;
  if (m === 'unknown column in request') return method === 'GET' || method === 'HEAD' ? '42703' : 'PGRST204';
  if (m.startsWith('invalid embed in request')) return m.includes('more than one') ? 'PGRST201' : 'PGRST200';
  const known = POSTGREST[m];
  if (known !== undefined) return known.code;
  const sqlstate = typeof cause?.code === 'string' && SQLSTATE.test(cause.code) && !cause.code.startsWith('PT') ? cause.code : null;
  if (sqlstate !== null) return sqlstate;
  if (err.status === 400) return 'PGRST100';
  return err.status >= 500 ? 'PGRSTX00' : 'PGRST000';
}

/** A body in PostgREST's shape (the status stays plinth's). */
export function postgrestBody(err: AppError, method: string): Record<string, unknown> {
  const code = postgrestCode(err, method);
  const named = namedMessage(err, code);
  if (named !== null) return { code, message: named.message, details: named.details, hint: named.hint ?? null };
  let details: string | null = null;
  if (code === 'PGRST116') {
    const rows = err.internal?.rows;
    details = typeof rows === 'number' ? `The result contains ${rows} rows` : 'The result contains 0 or more than 1 rows';
  }
  // PostgreSQL's hint of a merging upsert given one key twice (21000): names nothing of the request.
  const hint = code === '21000' ? 'Ensure that no rows proposed for insertion within the same command have duplicate constrained values.' : null;
  return { code, message: err.publicMessage, details, hint };
}

/** A name the request itself wrote (a column, a relation of its select), as PostgREST quotes it: at most 63 characters. */
function requestName(v: unknown): string | null {
  return typeof v === 'string' && v.length > 0 && v.length <= 63 ? v : null;
}

/**
 * PostgREST's wording for the refusals that name what the request named (never anything
 * the request did not write): an unknown column of a read (42703), an embed without a
 * relationship (PGRST200), or with several (PGRST201: the relationships' keys and columns,
 * which the default mode's message names too).
 */
function namedMessage(err: AppError, code: string): { message: string; details: unknown; hint?: string } | null {
  const i = err.internal;
  if (code === '42703') {
    const column = requestName(i?.column);
    const relation = requestName(i?.relation);
    return column === null || relation === null ? null : { message: `column ${relation}.${column} does not exist`, details: null };
  }
  if (code === 'PGRST200') {
    const from = requestName(i?.from);
    const to = requestName(i?.to);
    if (from === null || to === null) return null;
    return {
      message: `Could not find a relationship between '${from}' and '${to}' in the schema cache`,
      details: `Searched for a foreign key relationship between '${from}' and '${to}' in the schema 'public', but no matches were found.`,
    };
  }
  if (code === 'PGRST201') {
    const from = requestName(i?.from);
    const to = requestName(i?.to);
    const hints = i?.hints;
    if (from === null || to === null || !Array.isArray(hints)) return null;
    return {
      message: `Could not embed because more than one relationship was found for '${from}' and '${to}'`,
      details: Array.isArray(i?.candidates) && i.candidates.length > 0 ? i.candidates : null,
      hint: `Try changing '${to}' to one of the following: ${hints.map((h) => `'${String(h)}'`).join(', ')}. Find the desired relationship in the 'details' key.`,
    };
  }
  return null;
}
