/**
 * Request ids and the request log.
 *
 * Every request has an id: the caller's `X-Request-Id` when it is 1 to 128 characters of
 * `[A-Za-z0-9._:-]` (a load balancer's or a client's trace id is kept, so one id follows a
 * request through every hop), otherwise a new UUID. The id goes back in `X-Request-Id`, into
 * every log line of the request, to edge functions, to SQL as the transaction setting
 * `request.id`, and with each webhook delivery attempt the request caused.
 *
 * Each answered request is one log line at info and one entry of a bounded ring
 * (REQUEST_LOG_SIZE, default 1000) that the dashboard reads at `GET /api/requests`.
 */
import { randomUUID } from 'node:crypto';
import { RequestMinutes } from './request-minutes.ts';

const INCOMING_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The id of a request: the incoming one when it is acceptable, otherwise a new one. */
export function requestIdFrom(header: string | string[] | undefined): string {
  return typeof header === 'string' && INCOMING_ID.test(header) ? header : randomUUID();
}

const ownIds = new WeakMap<object, string>();

/**
 * The service's own id of a request and the caller's, for records a caller must not name
 * (the audit log): the request's id when the service made it; when the caller chose it
 * (X-Request-Id), a new UUID, the same for the whole request, with the caller's beside it.
 */
export function ownRequestId(req: { id: string; raw: object; headers: Record<string, unknown> }): { own: string; client: string | null } {
  if (req.headers['x-request-id'] !== req.id) return { own: req.id, client: null };
  let own = ownIds.get(req.raw);
  if (own === undefined) {
    own = randomUUID();
    ownIds.set(req.raw, own);
  }
  return { own, client: req.id };
}

/** One answered request, as the log line and `GET /api/requests` show it. */
export interface RequestEntry {
  id: string;
  /** When the answer finished, ISO 8601 UTC. */
  time: string;
  method: string;
  /** The route pattern (`/rest/v1/:table`), null when no route matched. */
  route: string | null;
  /** The path without its query string (which may hold credentials). */
  path: string;
  status: number;
  /** Milliseconds from the request's arrival to the end of its answer. */
  duration_ms: number;
  /** The API role the credential resolved to, null when none did. */
  role: string | null;
  /** The user's id for a user's access token, else null. */
  user_id: string | null;
}

/** The last `size` requests, oldest overwritten first. */
export class RequestLog {
  readonly size: number;
  private readonly ring: Array<RequestEntry | undefined>;
  private next = 0;
  private count = 0;
  /** Per-minute counts of the last hour (the dashboard's chart), kept whatever the ring's size. */
  readonly minutes = new RequestMinutes();

  constructor(size: number) {
    this.size = size;
    this.ring = new Array<RequestEntry | undefined>(size);
  }

  add(entry: RequestEntry): void {
    this.minutes.add(entry);
    if (this.size === 0) return;
    this.ring[this.next] = entry;
    this.next = (this.next + 1) % this.size;
    if (this.count < this.size) this.count++;
  }

  /** Newest first, at most `limit`. */
  latest(limit = this.size): RequestEntry[] {
    const n = Math.min(limit, this.count);
    const out: RequestEntry[] = [];
    for (let i = 1; i <= n; i++) out.push(this.ring[(this.next - i + this.size) % this.size]!);
    return out;
  }
}

/** The caller a request resolved to, for its log line: set where the credential is resolved. */
export interface RequestCaller {
  role: string;
  userId: string | null;
}
