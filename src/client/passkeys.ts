/**
 * `auth.passkey`, and `auth.registerPasskey()` / `auth.signInWithPasskey()` in supabase-js's
 * names: the WebAuthn ceremonies in the browser (navigator.credentials), the service's
 * /auth/v1/passkeys endpoints around them (docs/client.md, Passkeys). The options and the
 * credentials cross the wire as WebAuthn's JSON (base64url for bytes), converted here.
 */
import { PlinthError, type Http, type Result } from './http.ts';
import type { SessionData } from './session.ts';

export interface Passkey {
  id: string;
  friendly_name?: string;
  created_at: string;
  last_used_at?: string;
}


export interface PasskeyHost {
  token(): Promise<string | null>;
  /** Take a sign-in's answer as the current session (SIGNED_IN). */
  signedIn(r: Result<unknown>): Promise<Result<SessionData>>;
}

type Json = Record<string, unknown>;

function fromB64u(s: string): ArrayBuffer {
  const b64 = s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4);
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out.buffer;
}

function toB64u(buf: ArrayBuffer | ArrayBufferView | null): string | undefined {
  if (buf === null) return undefined;
  const bytes = buf instanceof ArrayBuffer ? new Uint8Array(buf) : new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function descriptors(list: unknown): PublicKeyCredentialDescriptor[] | undefined {
  if (!Array.isArray(list)) return undefined;
  return (list as { id: string; type?: string; transports?: AuthenticatorTransport[] }[]).map((d) => ({
    id: fromB64u(d.id),
    type: 'public-key',
    transports: d.transports,
  }));
}

/** The credential's JSON (what PublicKeyCredential.toJSON() gives where it exists). */
function credentialJson(c: PublicKeyCredential): Json {
  const response: Json = { clientDataJSON: toB64u(c.response.clientDataJSON) };
  if ('attestationObject' in c.response) {
    const r = c.response as AuthenticatorAttestationResponse;
    response.attestationObject = toB64u(r.attestationObject);
    if (typeof r.getTransports === 'function') response.transports = r.getTransports();
  } else {
    const r = c.response as AuthenticatorAssertionResponse;
    response.authenticatorData = toB64u(r.authenticatorData);
    response.signature = toB64u(r.signature);
    response.userHandle = toB64u(r.userHandle);
  }
  return {
    id: c.id,
    rawId: toB64u(c.rawId),
    type: c.type,
    response,
    authenticatorAttachment: c.authenticatorAttachment ?? undefined,
    clientExtensionResults: c.getClientExtensionResults(),
  };
}

export class PasskeyApi {
  private readonly http: Http;
  private readonly host: PasskeyHost;

  constructor(http: Http, host: PasskeyHost) {
    this.http = http;
    this.host = host;
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<Result<T>> {
    const token = await this.host.token();
    if (!token) return { data: null, error: new PlinthError('not signed in', 401) };
    const r = await this.http.request<T>(method, path, { headers: { authorization: `Bearer ${token}` }, body });
    return r.error ? { data: null, error: r.error } : { data: r.data, error: null };
  }

  /** The browser's prompt; its refusal (cancelled, no authenticator) is an error of status 0. */
  private async ceremony(run: () => Promise<Credential | null>): Promise<Result<Json>> {
    const creds = typeof navigator === 'undefined' ? undefined : navigator.credentials;
    if (creds === undefined || typeof PublicKeyCredential === 'undefined') {
      return { data: null, error: new PlinthError('passkeys are not supported here', 0) };
    }
    try {
      const c = await run();
      if (c === null) return { data: null, error: new PlinthError('no passkey was chosen', 0) };
      return { data: credentialJson(c as PublicKeyCredential), error: null };
    } catch (e) {
      const name = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      return { data: null, error: new PlinthError(`passkey ceremony failed (${name})`, 0) };
    }
  }

  /** Register a passkey on the signed-in account: options, `navigator.credentials.create()`, verify. */
  async register(options: { friendlyName?: string; signal?: AbortSignal } = {}): Promise<Result<Passkey>> {
    const o = await this.call<{ challenge_id: string; options: Json }>('POST', '/auth/v1/passkeys/registration/options', {});
    if (o.error) return o;
    const j = o.data.options as Json & { challenge: string; user: Json & { id: string }; excludeCredentials?: unknown };
    const publicKey = {
      ...j,
      challenge: fromB64u(j.challenge),
      user: { ...j.user, id: fromB64u(j.user.id) },
      excludeCredentials: descriptors(j.excludeCredentials),
    } as unknown as PublicKeyCredentialCreationOptions;
    const c = await this.ceremony(() => navigator.credentials.create({ publicKey, signal: options.signal }));
    if (c.error) return c;
    const body: Json = { challenge_id: o.data.challenge_id, credential: c.data };
    if (options.friendlyName !== undefined) body.friendly_name = options.friendlyName;
    return this.call<Passkey>('POST', '/auth/v1/passkeys/registration/verify', body);
  }

  /** Sign in with a passkey of this site: options, `navigator.credentials.get()`, verify → a session (SIGNED_IN). */
  async signIn(options: { signal?: AbortSignal } = {}): Promise<Result<SessionData>> {
    const o = await this.http.request<{ challenge_id: string; options: Json }>('POST', '/auth/v1/passkeys/authentication/options', { noAuth: true, body: {} });
    if (o.error) return { data: null, error: o.error };
    const j = o.data.options as Json & { challenge: string; allowCredentials?: unknown };
    const publicKey = { ...j, challenge: fromB64u(j.challenge), allowCredentials: descriptors(j.allowCredentials) } as unknown as PublicKeyCredentialRequestOptions;
    const c = await this.ceremony(() => navigator.credentials.get({ publicKey, signal: options.signal }));
    if (c.error) return c;
    const r = await this.http.request('POST', '/auth/v1/passkeys/authentication/verify', {
      noAuth: true,
      body: { challenge_id: o.data.challenge_id, credential: c.data },
    });
    return this.host.signedIn(r);
  }

  /** The signed-in user's passkeys, oldest first. */
  async list(): Promise<Result<Passkey[]>> {
    return this.call<Passkey[]>('GET', '/auth/v1/passkeys');
  }

  async update(params: { passkeyId: string; friendlyName: string }): Promise<Result<Passkey>> {
    return this.call<Passkey>('PATCH', `/auth/v1/passkeys/${encodeURIComponent(params.passkeyId)}`, { friendly_name: params.friendlyName });
  }

  async delete(params: { passkeyId: string }): Promise<Result<null>> {
    const r = await this.call<unknown>('DELETE', `/auth/v1/passkeys/${encodeURIComponent(params.passkeyId)}`);
    return r.error ? r : { data: null, error: null };
  }
}
