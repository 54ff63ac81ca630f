/**
 * The session from the application's side: the shapes of the server's user and session, where
 * the session is kept (`sessionStorage`, memory, or a storage of the application's), and what
 * the client reads from a token. The AuthClient (auth.ts) and the MFA API (mfa.ts) share them.
 */
import type * as wire from '../shared/wire.ts';
import type { Result } from './http.ts';

/** The server's User (src/shared/wire.ts); fields a later server adds pass through. */
export interface User extends wire.User {
  [key: string]: unknown;
}

/** The server's Session as the client keeps it: with the time it expires at, and no user once signed out of. */
export interface Session extends Omit<wire.Session, 'token_type' | 'user'> {
  /** Unix time (seconds) the access token expires at. */
  expires_at: number;
  token_type: string;
  user: User | null;
}

export type AuthChangeEvent = 'SIGNED_IN' | 'SIGNED_OUT' | 'TOKEN_REFRESHED' | 'USER_UPDATED' | 'MFA_CHALLENGE_VERIFIED';

/** A second factor of the user (GET /auth/v1/user lists them as `factors`). */
export interface Factor {
  id: string;
  friendly_name: string | null;
  factor_type: 'totp';
  status: 'verified' | 'unverified';
  created_at: string;
  updated_at: string;
}

export type AuthenticatorAssuranceLevel = 'aal1' | 'aal2';
export type AuthChangeCallback = (event: AuthChangeEvent, session: Session | null) => void;

/** Where the session is kept: `sessionStorage`, `localStorage`, or anything alike. */
export interface SupportedStorage {
  getItem(key: string): string | null | Promise<string | null>;
  setItem(key: string, value: string): void | Promise<void>;
  removeItem(key: string): void | Promise<void>;
}

export interface AuthOptions {
  /** Default: `sessionStorage` in a browser, memory elsewhere. */
  storage?: SupportedStorage;
  storageKey?: string;
  /** false: keep the session in memory only. */
  persistSession?: boolean;
  autoRefreshToken?: boolean;
  /** Read a session (or an OAuth error) from the URL fragment after a redirect, then clear it. */
  detectSessionInUrl?: boolean;
  /** Seconds before expiry at which the token is refreshed (docs/api/overview.md: 60). */
  refreshLeadSeconds?: number;
}

export type AuthResult<T> = Promise<Result<T>>;
export type SessionData = { user: User | null; session: Session | null };
/** signInWithOtp: an address (magic link and code) or a phone number in E.164 (a code by SMS). */
export type OtpCredentials = { email: string } | { phone: string; options?: { shouldCreateUser?: boolean; data?: Record<string, unknown> } };
/** verifyOtp with a 6-digit code. */
export type CodeParams = { type: 'email'; email: string; token: string } | { type: 'sms'; phone: string; token: string };

interface BrowserGlobals {
  window?: unknown;
  document?: unknown;
  location?: { hash: string; pathname: string; search: string; assign(url: string): void };
  history?: { replaceState(data: unknown, unused: string, url?: string): void };
  /** The browser's, synchronous. */
  sessionStorage?: { getItem(key: string): string | null; setItem(key: string, value: string): void; removeItem(key: string): void };
  atob?: (s: string) => string;
  navigator?: { locks?: { request<T>(name: string, cb: () => Promise<T>): Promise<T> } };
}

export const g = globalThis as unknown as BrowserGlobals;

export function isBrowser(): boolean {
  return typeof g.window !== 'undefined' && typeof g.document !== 'undefined';
}

export class MemoryStorage implements SupportedStorage {
  private readonly items = new Map<string, string>();
  getItem(key: string): string | null {
    return this.items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.items.set(key, value);
  }
  removeItem(key: string): void {
    this.items.delete(key);
  }
}

export function defaultStorage(): SupportedStorage {
  try {
    const s = g.sessionStorage;
    if (s) {
      const probe = '__plinth_probe__';
      s.setItem(probe, '1');
      s.removeItem(probe);
      return s;
    }
  } catch {
    /* sandboxed or disabled: fall back to memory */
  }
  return new MemoryStorage();
}

/** The claims of a JWT (not verified: the service does that), or null. */
export function jwtClaims(token: string): Record<string, unknown> | null {
  try {
    const part = token.split('.')[1];
    if (!part) return null;
    const b64 = part.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (part.length % 4)) % 4);
    const bin = g.atob ? g.atob(b64) : '';
    const json = decodeURIComponent(
      Array.from(bin, (c) => '%' + c.charCodeAt(0).toString(16).padStart(2, '0')).join(''),
    );
    const claims = JSON.parse(json) as unknown;
    return typeof claims === 'object' && claims !== null ? (claims as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The `exp` claim of a JWT, or null. */
export function jwtExpiry(token: string): number | null {
  const exp = jwtClaims(token)?.exp;
  return typeof exp === 'number' ? exp : null;
}

export const now = () => Math.floor(Date.now() / 1000);

/** A session from a token response or a URL fragment. */
export function toSession(t: { access_token: string; refresh_token: string; expires_in?: number | string; token_type?: string; user?: User | null }): Session {
  const expiresIn = Number(t.expires_in ?? 3600);
  return {
    access_token: t.access_token,
    refresh_token: t.refresh_token,
    expires_in: expiresIn,
    expires_at: jwtExpiry(t.access_token) ?? now() + expiresIn,
    token_type: t.token_type ?? 'bearer',
    user: t.user ?? null,
  };
}
