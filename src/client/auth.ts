/**
 * Accounts and sessions from the application's side (docs/api/auth.md, docs/client.md): the names
 * and shapes of supabase-js's `auth` where the interface allows. The session lives in
 * tab-scoped `sessionStorage` by default; the access token is refreshed 60 s before it
 * expires, once however many calls race for it; a refused refresh (reuse detected, expired,
 * revoked) ends the session with `SIGNED_OUT`.
 */
import { PlinthError, type Http, type Result } from './http.ts';
import { MfaApi } from './mfa.ts';
import { PasskeyApi, type Passkey } from './passkeys.ts';
import {
  MemoryStorage,
  defaultStorage,
  g,
  isBrowser,
  now,
  toSession,
  type AuthChangeCallback,
  type AuthChangeEvent,
  type AuthOptions,
  type AuthResult,
  type CodeParams,
  type OtpCredentials,
  type Session,
  type SessionData,
  type SupportedStorage,
  type User,
} from './session.ts';

export { MfaApi, type EnrolledFactor } from './mfa.ts';
export {
  MemoryStorage,
  type CodeParams,
  type OtpCredentials,
  isBrowser,
  jwtClaims,
  jwtExpiry,
  toSession,
  type AuthChangeCallback,
  type AuthChangeEvent,
  type AuthenticatorAssuranceLevel,
  type AuthOptions,
  type Factor,
  type Session,
  type SupportedStorage,
  type User,
} from './session.ts';

/** Statuses after which a refresh token can never work again: the session is over. */
function refreshRefused(e: PlinthError): boolean {
  return e.status >= 400 && e.status < 500 && e.status !== 429 && e.status !== 408;
}

const MAX_TIMEOUT = 2_147_483_647;

export class AuthClient {
  private readonly http: Http;
  private readonly storage: SupportedStorage;
  private readonly storageKey: string;
  private autoRefresh: boolean;
  private readonly lead: number;
  private readonly listeners = new Set<AuthChangeCallback>();
  private session: Session | null = null;
  private refreshing: Promise<Result<Session>> | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private retryDelay = 1000;
  private urlError: PlinthError | null = null;
  /** Resolves when the stored session (and a session in the URL) has been read. */
  readonly ready: Promise<void>;
  /** Second factors (TOTP): enrol, challenge, verify, unenrol, list, assurance level. */
  readonly mfa: MfaApi;
  /** Passkeys (WebAuthn): register, sign in, list, rename, delete (src/client/passkeys.ts). */
  readonly passkey: PasskeyApi;

  constructor(http: Http, options: AuthOptions = {}) {
    this.http = http;
    this.storage = options.persistSession === false ? new MemoryStorage() : (options.storage ?? defaultStorage());
    this.storageKey = options.storageKey ?? 'plinth.auth.token';
    this.autoRefresh = options.autoRefreshToken ?? true;
    this.lead = options.refreshLeadSeconds ?? 60;
    this.ready = this.initialize(options.detectSessionInUrl ?? true);
    this.passkey = new PasskeyApi(this.http, { token: () => this.getAccessToken(), signedIn: async (r) => this.ready.then(() => this.signedIn(r)) });
    this.mfa = new MfaApi(this.http, {
      token: () => this.getAccessToken(),
      session: async () => {
        await this.ready;
        return this.session;
      },
      user: (jwt) => this.getUser(jwt),
      adopt: async (data) => {
        const session = toSession(data);
        await this.save(session);
        this.emit('MFA_CHALLENGE_VERIFIED', session);
        return session;
      },
    });
  }

  private async initialize(detect: boolean): Promise<void> {
    try {
      const raw = await this.storage.getItem(this.storageKey);
      if (raw) {
        const s = JSON.parse(raw) as Session;
        if (s && typeof s.access_token === 'string' && typeof s.refresh_token === 'string') this.session = s;
      }
    } catch {
      this.session = null;
    }
    if (detect && isBrowser() && g.location) await this.fromUrl(g.location.hash);
    this.schedule();
  }

  /** A session (or an OAuth error) in the fragment after an OAuth or magic-link redirect. */
  private async fromUrl(hash: string): Promise<void> {
    if (!hash || hash.length < 2) return;
    const p = new URLSearchParams(hash.slice(1));
    const accessToken = p.get('access_token');
    const refreshToken = p.get('refresh_token');
    const error = p.get('error');
    if (!error && !(accessToken && refreshToken)) return;
    const loc = g.location;
    if (loc && g.history) g.history.replaceState(null, '', loc.pathname + loc.search);
    if (error) {
      this.urlError = new PlinthError(p.get('error_description') || error, 400, { error, error_description: p.get('error_description') });
      return;
    }
    const session = toSession({
      access_token: accessToken!,
      refresh_token: refreshToken!,
      expires_in: p.get('expires_in') ?? undefined,
      token_type: p.get('token_type') ?? undefined,
    });
    const user = await this.fetchUser(session.access_token);
    session.user = user.data;
    await this.save(session);
    this.emit('SIGNED_IN', session);
  }

  // ---- events -------------------------------------------------------------------------

  /** Calls `callback(event, session)` on SIGNED_IN, SIGNED_OUT, TOKEN_REFRESHED, USER_UPDATED. */
  onAuthStateChange(callback: AuthChangeCallback): {
    data: { subscription: { unsubscribe: () => void } };
    unsubscribe: () => void;
  } {
    this.listeners.add(callback);
    const unsubscribe = () => {
      this.listeners.delete(callback);
    };
    return { data: { subscription: { unsubscribe } }, unsubscribe };
  }

  private emit(event: AuthChangeEvent, session: Session | null): void {
    for (const cb of [...this.listeners]) {
      try {
        cb(event, session);
      } catch {
        /* a listener's failure is its own */
      }
    }
  }

  // ---- session state ------------------------------------------------------------------

  private async save(session: Session | null): Promise<void> {
    this.session = session;
    try {
      if (session) await this.storage.setItem(this.storageKey, JSON.stringify(session));
      else await this.storage.removeItem(this.storageKey);
    } catch {
      /* storage full or gone: the session still lives in memory */
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const s = this.session;
    if (!this.autoRefresh || !s) return;
    const ms = Math.min(MAX_TIMEOUT, Math.max(0, (s.expires_at - this.lead) * 1000 - Date.now()));
    this.setTimer(ms);
  }

  private setTimer(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    const t = setTimeout(() => {
      this.timer = null;
      void this.refreshFor(this.session);
    }, ms);
    (t as { unref?: () => void }).unref?.();
    this.timer = t;
  }

  /** Refresh `session` once, however many callers ask at the same time. */
  private refreshFor(session: Session | null): Promise<Result<Session>> {
    if (!session) return Promise.resolve({ data: null, error: new PlinthError('no session', 401) });
    if (this.refreshing) return this.refreshing;
    const p = this.doRefresh(session).finally(() => {
      if (this.refreshing === p) this.refreshing = null;
    });
    this.refreshing = p;
    return p;
  }

  /**
   * Clients sharing one storage (two `createClient`s in a page) refresh under a Web Lock and
   * adopt a session another one has just refreshed, instead of replaying its refresh token.
   */
  private async doRefresh(session: Session): Promise<Result<Session>> {
    const locks = g.navigator?.locks;
    if (!locks || this.storage instanceof MemoryStorage) return this.refreshNow(session);
    return locks.request(`plinth-refresh:${this.storageKey}`, async () => {
      try {
        const raw = await this.storage.getItem(this.storageKey);
        const stored = raw ? (JSON.parse(raw) as Session) : null;
        if (stored && stored.refresh_token !== session.refresh_token && this.session?.refresh_token === session.refresh_token && stored.expires_at - this.lead > now()) {
          this.session = stored;
          this.schedule();
          this.emit('TOKEN_REFRESHED', stored);
          return { data: stored, error: null };
        }
      } catch {
        /* unreadable storage: refresh */
      }
      return this.refreshNow(session);
    });
  }

  private async refreshNow(session: Session): Promise<Result<Session>> {
    const r = await this.http.request<Omit<Session, 'expires_at'>>('POST', '/auth/v1/token', {
      noAuth: true,
      body: { grant_type: 'refresh_token', refresh_token: session.refresh_token },
    });
    if (this.session?.refresh_token !== session.refresh_token) {
      // Signed out or signed in as someone else meanwhile: this answer is stale.
      return r.error ? { data: null, error: r.error } : { data: this.session!, error: null };
    }
    if (r.error) {
      if (refreshRefused(r.error)) {
        await this.save(null);
        this.emit('SIGNED_OUT', null);
      } else if (this.autoRefresh) {
        // Network or server trouble: keep the session and try again, backing off.
        this.setTimer(this.retryDelay);
        this.retryDelay = Math.min(this.retryDelay * 2, 30_000);
      }
      return { data: null, error: r.error };
    }
    this.retryDelay = 1000;
    const next = toSession({ ...r.data, user: r.data.user ?? session.user });
    await this.save(next);
    this.emit('TOKEN_REFRESHED', next);
    return { data: next, error: null };
  }

  /** The access token to send now, refreshed first when it is within the lead of expiry. */
  async getAccessToken(): Promise<string | null> {
    await this.ready;
    const s = this.session;
    if (!s) return null;
    if ((this.autoRefresh && s.expires_at - this.lead <= now()) || s.expires_at <= now()) {
      const r = await this.refreshFor(s);
      if (r.data) return r.data.access_token;
      if (!this.session || this.session.expires_at <= now()) return null;
    }
    return this.session?.access_token ?? null;
  }

  /** The current session (refreshed first when due); `error` once for a failed OAuth redirect. */
  async getSession(): AuthResult<{ session: Session | null }> {
    await this.ready;
    if (this.urlError) {
      const error = this.urlError;
      this.urlError = null;
      return { data: null, error };
    }
    await this.getAccessToken();
    return { data: { session: this.session }, error: null };
  }

  /** Refresh now with the stored (or given) refresh token. */
  async refreshSession(current?: { refresh_token: string }): AuthResult<SessionData> {
    await this.ready;
    let s = this.session;
    if (current?.refresh_token && current.refresh_token !== s?.refresh_token) {
      s = { ...(s ?? toSession({ access_token: '', refresh_token: '' })), refresh_token: current.refresh_token };
      this.session = s;
    }
    const r = await this.refreshFor(s);
    if (r.error) return { data: null, error: r.error };
    return { data: { session: r.data, user: r.data.user }, error: null };
  }

  /** Start a session from tokens obtained elsewhere (emits SIGNED_IN). */
  async setSession(tokens: { access_token: string; refresh_token: string }): AuthResult<SessionData> {
    await this.ready;
    const session = toSession(tokens);
    const user = await this.fetchUser(session.access_token);
    if (user.error) return { data: null, error: user.error };
    session.user = user.data;
    await this.save(session);
    this.emit('SIGNED_IN', session);
    return { data: { session, user: user.data }, error: null };
  }

  private async signedIn(r: Result<unknown>): AuthResult<SessionData> {
    if (r.error) return { data: null, error: r.error };
    const session = toSession(r.data as Session);
    await this.save(session);
    this.emit('SIGNED_IN', session);
    return { data: { user: session.user, session }, error: null };
  }

  // ---- sign-up and sign-in ------------------------------------------------------------

  /** POST /auth/v1/signup. With email verification on: no session, and `message`. */
  async signUp(credentials: { email: string; password: string; options?: { data?: Record<string, unknown> } }): AuthResult<SessionData & { message?: string }> {
    await this.ready;
    const body: Record<string, unknown> = { email: credentials.email, password: credentials.password };
    if (credentials.options?.data) body.data = credentials.options.data;
    const r = await this.http.request<Record<string, unknown>>('POST', '/auth/v1/signup', { noAuth: true, body });
    if (r.error) return { data: null, error: r.error };
    if (typeof r.data?.access_token !== 'string') {
      return { data: { user: null, session: null, message: r.data?.message as string | undefined }, error: null };
    }
    return this.signedIn(r);
  }

  async signInWithPassword(credentials: { email: string; password: string }): AuthResult<SessionData> {
    await this.ready;
    const r = await this.http.request('POST', '/auth/v1/token', {
      noAuth: true,
      body: { grant_type: 'password', email: credentials.email, password: credentials.password },
    });
    return this.signedIn(r);
  }

  /** Sign in with a passkey (WebAuthn in the browser; see `passkey`). */
  signInWithPasskey(options?: { signal?: AbortSignal }): AuthResult<SessionData> {
    return this.passkey.signIn(options);
  }

  /** Register a passkey on the signed-in account (WebAuthn in the browser). */
  registerPasskey(options?: { friendlyName?: string; signal?: AbortSignal }): AuthResult<Passkey> {
    return this.passkey.register(options);
  }

  /** A guest session (needs ALLOW_ANONYMOUS_SIGNIN=true on the service). */
  async signInAnonymously(): AuthResult<SessionData> {
    await this.ready;
    return this.signedIn(await this.http.request('POST', '/auth/v1/anonymous', { noAuth: true }));
  }

  /**
   * Start an OAuth sign-in: in a browser the page goes to the provider (unless
   * `skipBrowserRedirect`); the session comes back in the URL fragment of SITE_URL.
   */
  async signInWithOAuth(credentials: { provider: string; options?: { redirectTo?: string; skipBrowserRedirect?: boolean } }): AuthResult<{ provider: string; url: string }> {
    const q = new URLSearchParams({ provider: credentials.provider });
    if (credentials.options?.redirectTo) q.set('redirect_to', credentials.options.redirectTo);
    const url = `${this.http.url}/auth/v1/authorize?${q}`;
    if (isBrowser() && g.location && !credentials.options?.skipBrowserRedirect) g.location.assign(url);
    return { data: { provider: credentials.provider, url }, error: null };
  }

  /**
   * Send a magic link and its 6-digit code (POST /auth/v1/magiclink), or with `phone` a code
   * by SMS (POST /auth/v1/otp; `shouldCreateUser` defaults to true, as supabase-js). The same
   * answer whether or not the address or number exists. Use the code with `verifyOtp`.
   */
  async signInWithOtp(credentials: OtpCredentials): AuthResult<SessionData & { message?: string }> {
    const r =
      'phone' in credentials
        ? await this.http.request<{ message?: string }>('POST', '/auth/v1/otp', {
            noAuth: true,
            body: { phone: credentials.phone, create_user: credentials.options?.shouldCreateUser ?? true, data: credentials.options?.data, channel: 'sms' },
          })
        : await this.http.request<{ message?: string }>('POST', '/auth/v1/magiclink', { noAuth: true, body: { email: credentials.email } });
    if (r.error) return { data: null, error: r.error };
    return { data: { user: null, session: null, message: r.data?.message }, error: null };
  }

  /** Sign in with a 6-digit code: `{email, token, type: 'email'}` from a magic-link mail, `{phone, token, type: 'sms'}` from an SMS. */
  private async verifyCode(params: CodeParams): AuthResult<SessionData> {
    await this.ready;
    const body = 'phone' in params ? { type: 'sms', phone: params.phone, token: params.token } : { type: 'email', email: params.email, token: params.token };
    return this.signedIn(await this.http.request('POST', '/auth/v1/verify', { noAuth: true, body }));
  }

  /**
   * Use an emailed token. With `email` or `phone`: a 6-digit code signs in (POST /auth/v1/verify).
   * `signup`/`email`: confirm the address (GET /auth/v1/verify).
   * `recovery`: set `password` (POST /auth/v1/recover/confirm; no session).
   * `magiclink`: outside a browser, follow the link and start the session from its
   * redirect; in a browser the link itself is opened and the session arrives in the URL.
   */
  async verifyOtp(
    params: { type: 'signup' | 'email' | 'magiclink' | 'recovery'; token: string; password?: string } | CodeParams,
  ): AuthResult<SessionData & { message?: string }> {
    if ('phone' in params || 'email' in params) return this.verifyCode(params);
    await this.ready;
    if (params.type === 'recovery') {
      const r = await this.http.request<{ message?: string }>('POST', '/auth/v1/recover/confirm', {
        noAuth: true,
        body: { token: params.token, password: params.password ?? '' },
      });
      if (r.error) return { data: null, error: r.error };
      return { data: { user: null, session: null, message: r.data?.message }, error: null };
    }
    if (params.type === 'magiclink') {
      const r = await this.http.request('GET', '/auth/v1/magiclink/verify', { noAuth: true, query: { token: params.token }, redirect: 'manual' });
      if (r.error) return { data: null, error: r.error };
      const location = r.response?.headers.get('location') ?? '';
      const hash = location.includes('#') ? location.slice(location.indexOf('#') + 1) : '';
      const p = new URLSearchParams(hash);
      const access = p.get('access_token');
      const refresh = p.get('refresh_token');
      if (!access || !refresh) {
        const why = p.get('error_description') ?? 'the magic link must be opened in the browser (the session arrives in the URL fragment)';
        return { data: null, error: new PlinthError(why, r.status || 400) };
      }
      return this.setSession({ access_token: access, refresh_token: refresh });
    }
    const r = await this.http.request<{ message?: string }>('GET', '/auth/v1/verify', { noAuth: true, query: { token: params.token } });
    if (r.error) return { data: null, error: r.error };
    return { data: { user: null, session: null, message: r.data?.message }, error: null };
  }

  /** Email a recovery link (POST /auth/v1/recover); same answer whether or not the address exists. */
  async resetPasswordForEmail(email: string): AuthResult<{ message?: string }> {
    const r = await this.http.request<{ message?: string }>('POST', '/auth/v1/recover', { noAuth: true, body: { email } });
    if (r.error) return { data: null, error: r.error };
    return { data: { message: r.data?.message }, error: null };
  }

  // ---- the signed-in user --------------------------------------------------------------

  private async fetchUser(token: string): Promise<Result<User>> {
    // noAuth: the token is given (this also runs while the stored session is being read).
    const r = await this.http.request<User>('GET', '/auth/v1/user', { noAuth: true, headers: { authorization: `Bearer ${token}` } });
    return r.error ? { data: null, error: r.error } : { data: r.data, error: null };
  }

  /** GET /auth/v1/user with the session's token (or `jwt`). */
  async getUser(jwt?: string): AuthResult<{ user: User }> {
    const token = jwt ?? (await this.getAccessToken());
    if (!token) return { data: null, error: new PlinthError('not signed in', 401) };
    const r = await this.fetchUser(token);
    if (r.error) return { data: null, error: r.error };
    return { data: { user: r.data }, error: null };
  }

  /** PATCH /auth/v1/user; emits USER_UPDATED. */
  async updateUser(attributes: { email?: string; password?: string; data?: Record<string, unknown> }): AuthResult<{ user: User }> {
    const token = await this.getAccessToken();
    if (!token) return { data: null, error: new PlinthError('not signed in', 401) };
    const r = await this.http.request<User>('PATCH', '/auth/v1/user', {
      headers: { authorization: `Bearer ${token}` },
      body: attributes,
    });
    if (r.error) return { data: null, error: r.error };
    if (this.session && this.session.access_token === token) {
      const next = { ...this.session, user: r.data };
      await this.save(next);
      this.emit('USER_UPDATED', next);
    }
    return { data: { user: r.data }, error: null };
  }

  /** POST /auth/v1/logout (ends the refresh-token family), then forget the session locally. */
  async signOut(): Promise<{ error: PlinthError | null }> {
    await this.ready;
    const s = this.session;
    if (!s) return { error: null };
    const r = await this.http.request('POST', '/auth/v1/logout', {
      headers: { authorization: `Bearer ${s.access_token}` },
      body: {},
    });
    await this.save(null);
    this.emit('SIGNED_OUT', null);
    // An expired access token cannot log out, but the local session is gone either way.
    return { error: r.error && r.error.status !== 401 ? r.error : null };
  }

  /** Stop refreshing in the background (requests still refresh a token that is due). */
  stopAutoRefresh(): void {
    this.autoRefresh = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  startAutoRefresh(): void {
    this.autoRefresh = true;
    this.schedule();
  }
}
