/**
 * The dashboard's one way to plinth: same-origin fetch to the documented endpoints, with the
 * admin's bearer token. Errors come back as ApiError with the service's own message.
 */
export interface Session {
  /** The bearer token: an admin account's access token, or the service-role key. */
  token: string;
  kind: 'account' | 'key';
  email?: string;
  refreshToken?: string;
  /** An account's token: `aal2` once its second factor was verified in this sign-in. */
  aal?: string;
}

const KEY = 'plinth.dashboard.session';

export function loadSession(): Session | null {
  try {
    return JSON.parse(sessionStorage.getItem(KEY) ?? 'null') as Session | null;
  } catch {
    return null;
  }
}

let session: Session | null = loadSession();
const listeners = new Set<() => void>();

export function currentSession(): Session | null {
  return session;
}

export function setSession(s: Session | null): void {
  session = s;
  if (s) sessionStorage.setItem(KEY, JSON.stringify(s));
  else sessionStorage.removeItem(KEY);
  for (const l of listeners) l();
}

export function onSession(fn: () => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export class ApiError extends Error {
  status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export interface Answer<T> {
  status: number;
  headers: Headers;
  data: T;
  text: string;
  ms: number;
}

export interface CallOptions {
  body?: unknown;
  raw?: BodyInit;
  headers?: Record<string, string>;
  /** Another bearer than the session's (function invocation as another role); null: none. */
  token?: string | null;
  /** Resolve with the answer whatever its status (the function console shows every answer). */
  anyStatus?: boolean;
}

/**
 * The dashboard's own requests carry an X-Request-Id starting with `dashboard-`, so the Logs
 * view (and the per-minute chart) can keep them apart from the application's.
 */
export function dashboardRequestId(): string {
  const r = new Uint8Array(12);
  crypto.getRandomValues(r);
  return `dashboard-${Array.from(r, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

export async function call<T = unknown>(method: string, path: string, o: CallOptions = {}): Promise<Answer<T>> {
  const headers: Record<string, string> = { 'x-request-id': dashboardRequestId(), ...o.headers };
  const token = o.token === undefined ? session?.token : o.token;
  if (token) headers.authorization = `Bearer ${token}`;
  let body: BodyInit | undefined = o.raw;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] ??= 'application/json';
  }
  const started = performance.now();
  const res = await fetch(path, { method, headers, body, credentials: 'omit' });
  const text = await res.text();
  const ms = Math.round(performance.now() - started);
  let data: unknown = text;
  if ((res.headers.get('content-type') ?? '').includes('json') && text !== '') {
    try {
      data = JSON.parse(text);
    } catch {
      /* shown as text */
    }
  }
  if (!res.ok && !o.anyStatus) {
    const message = data && typeof data === 'object' && 'error' in data ? String(data.error) : text || res.statusText;
    if (res.status === 401 && o.token === undefined && session) setSession(null);
    throw new ApiError(res.status, message);
  }
  return { status: res.status, headers: res.headers, data: data as T, text, ms };
}

export async function get<T>(path: string): Promise<T> {
  return (await call<T>('GET', path)).data;
}

/** A file download through the session's credential, as a blob. */
export async function blob(path: string): Promise<Blob> {
  const headers: Record<string, string> = { 'x-request-id': dashboardRequestId() };
  if (session) headers.authorization = `Bearer ${session.token}`;
  const res = await fetch(path, { headers, credentials: 'omit' });
  if (!res.ok) {
    let message = res.statusText;
    try {
      message = ((await res.json()) as { error: string }).error;
    } catch {
      /* keep the status text */
    }
    throw new ApiError(res.status, message);
  }
  return res.blob();
}

/** An upload with progress (fetch reports none): XMLHttpRequest. */
export function upload(path: string, file: Blob, contentType: string, onProgress: (fraction: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', path);
    if (session) xhr.setRequestHeader('authorization', `Bearer ${session.token}`);
    xhr.setRequestHeader('x-request-id', dashboardRequestId());
    xhr.setRequestHeader('content-type', contentType || 'application/octet-stream');
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) return resolve();
      let message = xhr.statusText;
      try {
        message = (JSON.parse(xhr.responseText) as { error: string }).error;
      } catch {
        /* keep the status text */
      }
      reject(new ApiError(xhr.status, message));
    };
    xhr.onerror = () => reject(new ApiError(0, 'network error'));
    xhr.send(file);
  });
}

export function errorText(e: unknown): string {
  if (e instanceof ApiError) return `${e.status ? e.status + ' ' : ''}${e.message}`;
  return e instanceof Error ? e.message : String(e);
}
