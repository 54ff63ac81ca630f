/**
 * SUPABASE_COMPAT: GoTrue's User and Session objects, `redirect_to` checking (SITE_URL or
 * ADDITIONAL_REDIRECT_URLS, with GoTrue's globs) and the session fragment of a redirect.
 */
import type { Deps } from '../../core/area.ts';
import type { RuntimeConfig } from '../../core/config.ts';
import type { Sql } from '../../core/db.ts';
import { AppError, pgErrorToAppError } from '../../core/errors.ts';
import type { Session } from '../sessions.ts';

export const COMPAT_ERRORS = {
  redirectNotAllowed: () => new AppError(400, 'redirect_to is not an allowed redirect URL'),
  signupsNotAllowedForOtp: () => new AppError(422, 'Signups not allowed for otp'),
  unsupportedType: () => new AppError(400, 'unsupported verification type'),
  invalidScope: () => new AppError(400, 'scope must be global, local or others'),
  phoneUnsupported: () => new AppError(400, 'phone sign-in is not supported'),
} as const;

/** The GoTrue User object of an id (auth.compat_user); null when the user is gone. */
export async function compatUser(sql: Sql, userId: string): Promise<Record<string, unknown> | null> {
  try {
    const [r] = await sql<{ u: Record<string, unknown> | null }[]>`select auth.compat_user(${userId}::uuid) as u`;
    return r.u;
  } catch (err) {
    throw pgErrorToAppError(err, { trusted: true });
  }
}

export type GoTrueSession = Omit<Session, 'user'> & { expires_at: number; user: Record<string, unknown> };

/** A Session with `expires_at` and the GoTrue User. */
export async function compatSession(deps: Pick<Deps, 'db'>, s: Session): Promise<GoTrueSession> {
  const user = (await compatUser(deps.db.sql, s.user.id)) ?? { ...s.user };
  return { ...s, expires_at: Math.floor(Date.now() / 1000) + s.expires_in, user };
}

/** GoTrue's glob (gobwas, separators `.` and `/`): `*` within a label or segment, `**` across. */
export function globToRegExp(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*' && pattern[i + 1] === '*') {
      re += '.*';
      i++;
    } else if (c === '*') re += '[^./]*';
    else if (c === '?') re += '[^./]';
    else re += c.replace(/[\\^$+.()|{}[\]]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/**
 * The redirect target of a request: SITE_URL when none is given; a given one when it has
 * SITE_URL's origin or matches ADDITIONAL_REDIRECT_URLS; anything else is refused.
 */
export function redirectTarget(config: Pick<RuntimeConfig, 'siteUrl' | 'additionalRedirectUrls'>, given: unknown): string {
  if (given === undefined || given === '') return config.siteUrl;
  if (typeof given !== 'string') throw COMPAT_ERRORS.redirectNotAllowed();
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    throw COMPAT_ERRORS.redirectNotAllowed();
  }
  if ((url.protocol === 'http:' || url.protocol === 'https:') && url.origin === new URL(config.siteUrl).origin) return given;
  for (const p of config.additionalRedirectUrls) {
    if (p === given || globToRegExp(p).test(given)) return given;
  }
  throw COMPAT_ERRORS.redirectNotAllowed();
}

/** `target#access_token=…&expires_at=…&expires_in=…&refresh_token=…&token_type=bearer&type=…` (GoTrue's verify redirect). */
export function compatFragmentUrl(target: string, s: GoTrueSession, type: string): string {
  const p = new URLSearchParams({
    access_token: s.access_token,
    expires_at: String(s.expires_at),
    expires_in: String(s.expires_in),
    refresh_token: s.refresh_token,
    token_type: s.token_type,
    type,
  });
  return `${target.split('#')[0]}#${p.toString()}`;
}

/** `target#error=…&error_code=…&error_description=…`: a failed verify, as GoTrue redirects it. */
export function errorFragmentUrl(target: string, code: string, description: string): string {
  const p = new URLSearchParams({ error: 'access_denied', error_code: code, error_description: description });
  return `${target.split('#')[0]}#${p.toString()}`;
}
