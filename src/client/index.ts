/**
 * @plinth/client: plinth from a browser (or any runtime with fetch). supabase-js's names and
 * shapes where the interface allows (docs/client.md); every method answers
 * `{data, error}` and never throws for an HTTP error.
 *
 *   const plinth = createClient('https://api.example.com', ANON_KEY);
 *   await plinth.auth.signInWithPassword({ email, password });
 *   const { data, error } = await plinth.from('todos').select('id,title').order('id');
 */
import { PostgrestClient } from '@supabase/postgrest-js';
import { AuthClient, isBrowser, type AuthOptions } from './auth.ts';
import { runBatch, type BatchOperation } from './batch.ts';
import { FunctionsClient } from './functions.ts';
import { createHttp, type Fetch, type Http } from './http.ts';
import { LiveQuery, type LiveOptions } from './live.ts';
import { RealtimeChannel, RealtimeSocket, type ChannelOptions } from './realtime.ts';
import { StorageClient } from './storage.ts';

export { PlinthError, type Result } from './http.ts';
export {
  AuthClient,
  MemoryStorage,
  MfaApi,
  type AuthChangeEvent,
  type AuthenticatorAssuranceLevel,
  type AuthOptions,
  type EnrolledFactor,
  type Factor,
  type Session,
  type SupportedStorage,
  type User,
} from './auth.ts';
export { PasskeyApi, type Passkey } from './passkeys.ts';
export { ref, normalizeOperation, type BatchData, type BatchOperation, type BatchResult } from './batch.ts';
export { FunctionsClient, type InvokeOptions } from './functions.ts';
export {
  StorageClient,
  StorageFileApi,
  type Bucket,
  type BucketOptions,
  type FileObject,
  type ResumableOptions,
  type TransformOptions,
  type UploadOptions,
} from './storage.ts';
export { RealtimeChannel, type ChannelOptions, type ChannelStatus, type PostgresChange } from './realtime.ts';
export { LiveQuery, ResultSet, SeqTracker, type LiveOptions, type LiveStatus, type PresenceMap, type Row, type WebSocketLike } from './live.ts';

export interface ClientOptions {
  auth?: AuthOptions;
  /** Another fetch (default: the global one). */
  fetch?: Fetch;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

/** postgrest-js reads `message`; the service answers `{"error": "…"}` (docs/api/overview.md). */
async function postgrestErrors(res: Response): Promise<Response> {
  if (res.ok) return res;
  const text = await res.text();
  let message = text;
  try {
    const b = JSON.parse(text) as { error?: unknown; message?: unknown };
    if (typeof b.error === 'string') message = b.error;
    else if (typeof b.message === 'string') message = b.message;
  } catch {
    /* plain text */
  }
  const body = JSON.stringify({ message, status: res.status, code: '', details: '', hint: '' });
  return new Response(body, { status: res.status, statusText: res.statusText, headers: { 'content-type': 'application/json' } });
}

export class PlinthClient {
  readonly url: string;
  readonly anonKey: string;
  readonly auth: AuthClient;
  readonly storage: StorageClient;
  readonly functions: FunctionsClient;
  private readonly http: Http;
  private readonly rest: PostgrestClient;
  private readonly lives = new Set<LiveQuery>();
  private readonly realtime: RealtimeSocket;

  constructor(url: string, anonKey: string, options: ClientOptions = {}) {
    if (!url) throw new TypeError('createClient: url is required');
    if (!anonKey) throw new TypeError('createClient: anonKey is required');
    const plainFetch: Fetch = options.fetch ?? ((input, init) => fetch(input, init));
    // Read your writes behind read replicas: the server marks a write (`Plinth-Wrote`), and
    // the next requests carry the mark back, so they read from the primary while it is fresh.
    let wrote: string | null = null;
    const baseFetch: Fetch = async (input, init) => {
      let next = init;
      if (wrote !== null) {
        const h = new Headers(init?.headers);
        if (!h.has('plinth-wrote')) h.set('plinth-wrote', wrote);
        next = { ...init, headers: h };
      }
      const res = await plainFetch(input, next);
      const mark = res.headers.get('plinth-wrote');
      if (mark !== null) wrote = mark;
      return res;
    };
    const extra = options.headers ?? {};
    let auth: AuthClient | null = null;
    const headers = async (): Promise<Record<string, string>> => {
      const token = auth ? await auth.getAccessToken() : null;
      return { ...extra, apikey: anonKey, authorization: `Bearer ${token ?? anonKey}` };
    };
    this.http = createHttp(url, anonKey, baseFetch, headers, extra);
    this.url = this.http.url;
    this.anonKey = anonKey;
    auth = new AuthClient(this.http, options.auth);
    this.auth = auth;
    this.storage = new StorageClient(this.http, isBrowser());
    this.functions = new FunctionsClient(this.http);
    const restFetch: Fetch = async (input, init) => {
      const h = new Headers(init?.headers);
      for (const [k, v] of Object.entries(await headers())) if (!h.has(k)) h.set(k, v);
      return postgrestErrors(await baseFetch(input, { ...init, headers: h }));
    };
    this.rest = new PostgrestClient(`${this.url}/rest/v1`, { fetch: restFetch });
    this.realtime = new RealtimeSocket({ url: this.url, anonKey, getToken: () => this.auth.getAccessToken() });
    auth.onAuthStateChange((event) => {
      // Every joined channel gets the new token (its table subscriptions follow the new identity).
      if (event === 'SIGNED_IN' || event === 'SIGNED_OUT' || event === 'TOKEN_REFRESHED') void this.realtime.setAuth();
      if (event === 'SIGNED_IN' || event === 'SIGNED_OUT') for (const l of this.lives) l.reconnect();
      // The open sockets get the fresh token before the old one expires (the server closes them at its exp).
      if (event === 'TOKEN_REFRESHED') for (const l of this.lives) void l.reauthenticate();
    });
  }

  /** The query builder of @supabase/postgrest-js on `/rest/v1/<table>`. */
  from(table: string) {
    return this.rest.from(table);
  }

  /** POST /rest/v1/rpc/<fn> (GET with `{get: true}`: arguments in the query string). */
  rpc(fn: string, args: Record<string, unknown> = {}, options: { get?: boolean; head?: boolean; count?: 'exact' | 'planned' | 'estimated' } = {}) {
    return this.rest.rpc(fn, args, options);
  }

  /** POST /rest/v1/batch; build `{{op.field}}` templates with `ref(op, field)`. */
  batch(operations: BatchOperation[], options: { atomic?: boolean } = {}) {
    return runBatch(this.http, operations, options);
  }

  /**
   * A channel of `/realtime/v1` in supabase-js's shape: table changes under RLS
   * (`on('postgres_changes', {event, schema, table, filter}, cb)`), broadcast and presence;
   * `subscribe()` joins it (docs/api/realtime.md).
   */
  channel(name: string, options: ChannelOptions = {}): RealtimeChannel {
    return new RealtimeChannel(this.realtime, name, options);
  }

  /** Leaves a channel. */
  removeChannel(channel: RealtimeChannel): Promise<string> {
    return channel.unsubscribe();
  }

  /** A live query registered with `live.subscribe(queryId, …)`; see LiveQuery. */
  live(queryId: string, options: LiveOptions = {}): LiveQuery {
    const q = new LiveQuery(
      queryId,
      { url: this.url, fetch: this.http.fetch, anonKey: this.anonKey, getToken: () => this.auth.getAccessToken() },
      options,
    );
    this.lives.add(q);
    q.on('status', (s) => {
      if (s === 'closed') this.lives.delete(q);
    });
    return q;
  }
}

/** A client for the plinth at `url`, with its anon key. */
export function createClient(url: string, anonKey: string, options: ClientOptions = {}): PlinthClient {
  return new PlinthClient(url, anonKey, options);
}
