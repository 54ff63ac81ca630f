/** `auth.mfa`: TOTP factors, in supabase-js's names (docs/api/auth.md). */
import { PlinthError, type Http } from './http.ts';
import { jwtClaims, type AuthResult, type AuthenticatorAssuranceLevel, type Factor, type Session, type User } from './session.ts';

export interface MfaHost {
  token(): Promise<string | null>;
  session(): Promise<Session | null>;
  user(jwt?: string): AuthResult<{ user: User }>;
  /** Take the session a verification returned as the current one. */
  adopt(data: Omit<Session, 'expires_at'>): Promise<Session>;
}

export interface EnrolledFactor {
  id: string;
  type: 'totp';
  friendly_name: string | null;
  totp: { qr_code: string; secret: string; uri: string };
}

/**
 * `auth.mfa`, in supabase-js's names: TOTP factors (POST /auth/v1/factors …). A verified
 * code raises the session to aal2: the new session replaces the current one
 * (`MFA_CHALLENGE_VERIFIED`).
 */
export class MfaApi {
  private readonly http: Http;
  private readonly host: MfaHost;

  constructor(http: Http, host: MfaHost) {
    this.http = http;
    this.host = host;
  }

  private async call<T>(method: string, path: string, body?: unknown): AuthResult<T> {
    const token = await this.host.token();
    if (!token) return { data: null, error: new PlinthError('not signed in', 401) };
    const r = await this.http.request<T>(method, path, { headers: { authorization: `Bearer ${token}` }, body });
    return r.error ? { data: null, error: r.error } : { data: r.data, error: null };
  }

  /** A new, unverified TOTP factor: show `totp.qr_code` (an SVG data URI) or `totp.secret` to the user. */
  async enroll(params: { factorType: 'totp'; friendlyName?: string; issuer?: string }): AuthResult<EnrolledFactor> {
    const body: Record<string, unknown> = { factor_type: params.factorType };
    if (params.friendlyName !== undefined) body.friendly_name = params.friendlyName;
    if (params.issuer !== undefined) body.issuer = params.issuer;
    return this.call<EnrolledFactor>('POST', '/auth/v1/factors', body);
  }

  async challenge(params: { factorId: string }): AuthResult<{ id: string; type: 'totp'; expires_at: number }> {
    return this.call('POST', `/auth/v1/factors/${encodeURIComponent(params.factorId)}/challenge`, {});
  }

  /** Verify a code for a challenge; on success the session becomes the aal2 one returned. */
  async verify(params: { factorId: string; challengeId: string; code: string }): AuthResult<Session> {
    const r = await this.call<Omit<Session, 'expires_at'>>('POST', `/auth/v1/factors/${encodeURIComponent(params.factorId)}/verify`, {
      challenge_id: params.challengeId,
      code: params.code,
    });
    if (r.error) return { data: null, error: r.error };
    return { data: await this.host.adopt(r.data), error: null };
  }

  async challengeAndVerify(params: { factorId: string; code: string }): AuthResult<Session> {
    const c = await this.challenge({ factorId: params.factorId });
    if (c.error) return { data: null, error: c.error };
    return this.verify({ factorId: params.factorId, challengeId: c.data.id, code: params.code });
  }

  /** Remove a factor (a verified one needs an aal2 session). */
  async unenroll(params: { factorId: string }): AuthResult<{ id: string }> {
    return this.call('DELETE', `/auth/v1/factors/${encodeURIComponent(params.factorId)}`);
  }

  /** The user's factors: `all`, and `totp` (the verified TOTP ones). */
  async listFactors(): AuthResult<{ all: Factor[]; totp: Factor[] }> {
    const u = await this.host.user();
    if (u.error) return { data: null, error: u.error };
    const all = (u.data.user.factors as Factor[] | undefined) ?? [];
    return { data: { all, totp: all.filter((f) => f.factor_type === 'totp' && f.status === 'verified') }, error: null };
  }

  /**
   * `currentLevel`: the session's `aal` claim; `nextLevel`: aal2 when the user has a
   * verified factor (the session can be raised to it), else the current level.
   */
  async getAuthenticatorAssuranceLevel(): AuthResult<{
    currentLevel: AuthenticatorAssuranceLevel | null;
    nextLevel: AuthenticatorAssuranceLevel | null;
    currentAuthenticationMethods: { method: string; timestamp: number }[];
  }> {
    const session = await this.host.session();
    if (!session) return { data: { currentLevel: null, nextLevel: null, currentAuthenticationMethods: [] }, error: null };
    const claims = jwtClaims(session.access_token) ?? {};
    const currentLevel = claims.aal === 'aal2' ? 'aal2' : 'aal1';
    const factors = await this.listFactors();
    if (factors.error) return { data: null, error: factors.error };
    const nextLevel = factors.data.totp.length > 0 ? 'aal2' : currentLevel;
    const amr = Array.isArray(claims.amr) ? (claims.amr as { method: string; timestamp: number }[]) : [];
    return { data: { currentLevel, nextLevel, currentAuthenticationMethods: amr }, error: null };
  }
}
