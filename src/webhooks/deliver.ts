/**
 * The `webhooks__deliver` task (docs/api/webhooks.md, docs/architecture.md Jobs): one job is a
 * batch of attempts of one webhook (up to 25, as the outbox drain grouped them), asked
 * about in one statement, made concurrently, and recorded in one transaction.
 *
 * The job comes from the outbox (outbox.sql), with the body as text. Every attempt first
 * asks SQL whether it is still due and where it goes (`begin_attempts`: url and secret,
 * never in the job; `done` when this attempt is already recorded, so a job run again after
 * a crash does not post it twice), POSTs the exact bytes with
 *   Content-Type: application/json
 *   User-Agent: service-webhooks/1.0
 *   X-Webhook-Id: <delivery id>            (the same on every attempt: receivers drop duplicates)
 *   X-Webhook-Signature: sha256=<hex>      (HMAC-SHA256 of the bytes sent; only with a secret)
 * within WEBHOOK_TIMEOUT_MS (never to a link-local address, nor with WEBHOOK_DENY_PRIVATE to a
 * loopback or private one: address.ts, checked before connecting), and records the outcome (`record_attempt`), which in the same
 * transaction queues the next attempt (WEBHOOK_RETRY_SCHEDULE; +1 s, +4 s by default) or
 * ends the delivery. A non-2xx, a
 * network error or a timeout is a failed attempt; the task never throws for an HTTP failure,
 * so the worker's own backoff never applies to them.
 *
 * A service that stops (its HTTP server closes: `stopping` aborts) cuts its attempts in
 * flight short and gives them back unrecorded (`requeue_attempt`): the next instance makes
 * the same attempt at once, with the same X-Webhook-Id (the receiver may have seen the cut
 * one). A job this instance takes while stopping goes back the same way, 250 ms later, so
 * that another instance takes it. The task throws (the worker retries the job later, with
 * its own backoff) only when the database cannot be reached.
 */
import { createHmac } from 'node:crypto';
import type { ClientRequest } from 'node:http';
import https from 'node:https';
import type { Task } from 'graphile-worker';
import type { Deps } from '../core/area.ts';
import { hooks as spanHooks } from '../core/spans.ts';
import { addressGuard, type AddressGuard } from './address.ts';
import { beginAttempts, recordAttempts, requeueAttempt, type AttemptRecord, type BeginAttempt } from './db.ts';

// Not an ESM import of node:http: that loads Node's bundled undici (see src/core/http.ts).
const http = process.getBuiltinModule('node:http');

export const USER_AGENT = 'service-webhooks/1.0';

/** One attempt in a job, as webhooks_private.drain_outbox writes it (a job carries up to 25 of them). */
export interface DeliverPayload {
  /** delivery id (X-Webhook-Id) */
  d: string;
  /** webhook id */
  w: string;
  /** attempt number, 1..3 */
  n: number;
  /** event */
  e: string;
  /** table */
  t: string;
  /** when the change was made */
  c: string;
  /** the request body, as sent */
  b: string;
  /** the id of the request that made the change (absent or null: none) */
  r?: string | null;
}

function isPayload(p: unknown): p is DeliverPayload {
  const o = p as Partial<DeliverPayload> | null;
  return (
    typeof o === 'object' && o !== null && typeof o.d === 'string' && typeof o.w === 'string' && typeof o.n === 'number' &&
    typeof o.e === 'string' && typeof o.t === 'string' && typeof o.c === 'string' && typeof o.b === 'string'
  );
}

export interface AttemptOutcome {
  statusCode: number | null;
  error: string | null;
  /** The attempt was cut short by a stop of the service, not by the receiver. */
  interrupted: boolean;
}

interface Agents {
  http: import('node:http').Agent;
  https: https.Agent;
}

/**
 * Keep-alive: a receiver taking many deliveries is not reconnected for each one. One pair
 * per address guard, whose lookup made the sockets: a socket is reused only under the
 * policy that checked it (several services may share a process, each with its own).
 */
const agents = new WeakMap<AddressGuard, Agents>();
function agentsOf(guard: AddressGuard): Agents {
  let a = agents.get(guard);
  if (a === undefined) {
    const options = { keepAlive: true, maxSockets: 64, maxFreeSockets: 64, lookup: guard.lookup };
    a = { http: new http.Agent(options), https: new https.Agent(options) };
    agents.set(guard, a);
  }
  return a;
}

export function signature(secret: string, body: Buffer | string): string {
  return 'sha256=' + createHmac('sha256', secret).update(body).digest('hex');
}

function describe(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown } | null;
  const text = typeof e?.code === 'string' ? e.code : typeof e?.message === 'string' ? e.message : String(err);
  return text.slice(0, 200);
}

/**
 * One POST. Resolves with the status code once the response head arrives (the body is
 * drained and ignored), or with the error: `timeout` after `timeoutMs`, a refused address
 * (`guard`: a literal one before the request, a name's in the socket's lookup, so before
 * any packet is sent), else the network error's code. Never rejects.
 */
export function post(url: string, body: Buffer, headers: Record<string, string>, timeoutMs: number, abort: AbortSignal, guard: AddressGuard): Promise<AttemptOutcome> {
  return new Promise((resolve) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let onAbort = () => {};
    const done = (o: AttemptOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      abort.removeEventListener('abort', onAbort);
      resolve(o);
    };
    if (abort.aborted) {
      resolve({ statusCode: null, error: 'interrupted', interrupted: true });
      return;
    }
    let req: ClientRequest;
    try {
      const u = new URL(url);
      const refused = guard.literal(u.hostname);
      if (refused !== null) {
        done({ statusCode: null, error: describe(refused), interrupted: false });
        return;
      }
      const mod = u.protocol === 'https:' ? https : http;
      req = mod.request(u, {
        method: 'POST',
        agent: agentsOf(guard)[u.protocol === 'https:' ? 'https' : 'http'],
        lookup: guard.lookup,
        headers: { ...headers, 'content-length': String(body.length) },
      });
    } catch (err) {
      done({ statusCode: null, error: describe(err), interrupted: false });
      return;
    }
    req.on('error', (err) => done({ statusCode: null, error: describe(err), interrupted: false }));
    onAbort = () => {
      done({ statusCode: null, error: 'interrupted', interrupted: true });
      req.destroy(new Error('aborted'));
    };
    abort.addEventListener('abort', onAbort, { once: true });
    timer = setTimeout(() => {
      req.destroy(new Error('timeout'));
      done({ statusCode: null, error: `timeout after ${timeoutMs} ms`, interrupted: false });
    }, timeoutMs);
    req.on('response', (res) => {
      res.on('error', () => {});
      res.resume();
      done({ statusCode: res.statusCode ?? null, error: res.statusCode ? null : 'no status', interrupted: false });
    });
    req.end(body);
  });
}

/** The attempts of a job: `{"items": [...]}` as the outbox drain writes it, or one attempt's payload. */
function attemptsOf(payload: unknown): DeliverPayload[] | null {
  if (isPayload(payload)) return [payload];
  const items = (payload as { items?: unknown } | null)?.items;
  return Array.isArray(items) && items.length > 0 && items.every(isPayload) ? items : null;
}

/** `noteDue(ms)`: a retry was queued, due in `ms` (this instance's outbox drain polls then). */
export function deliverTask(deps: Deps, stopping: AbortSignal, noteDue: (ms: number) => void = () => {}): Task {
  const { db, log, config, metrics } = deps;
  const guard = addressGuard(config.webhookDenyPrivate);
  const giveBack = (p: DeliverPayload, delayMs: number) =>
    requeueAttempt(db.background, { d: p.d, w: p.w, n: p.n, e: p.e, t: p.t, c: p.c, b: p.b, r: typeof p.r === 'string' ? p.r : null }, delayMs);

  /** One attempt: POST, log, measure. Null when it is not due. */
  async function attempt(p: DeliverPayload, target: BeginAttempt, abort: AbortSignal): Promise<{ out: AttemptOutcome; record: AttemptRecord } | null> {
    switch (target.status) {
      case 'gone':
      case 'done':
        log.debug({ delivery: p.d, attempt: p.n, status: target.status }, 'webhooks__deliver: nothing to do');
        return null;
      case 'ok':
        break;
      default: {
        const never: never = target.status;
        throw new Error(`unknown begin_attempts status ${String(never)}`);
      }
    }
    const requestId = typeof p.r === 'string' ? p.r : null;
    const body = Buffer.from(p.b, 'utf8');
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'x-webhook-id': p.d,
    };
    if (target.secret) headers['x-webhook-signature'] = signature(target.secret, body);
    const attemptedAt = new Date();
    const t0 = performance.now();
    const span = spanHooks?.root('webhook delivery', { 'plinth.delivery_id': p.d, 'plinth.attempt': p.n, 'plinth.request_id': requestId ?? '' }) ?? null;
    const out = await post(target.url!, body, headers, config.webhookTimeoutMs, abort, guard);
    const durationMs = Math.round(performance.now() - t0);
    span?.end(out.error ?? undefined);
    const ok = out.statusCode !== null && out.statusCode >= 200 && out.statusCode < 300;
    const outcome = out.interrupted ? 'interrupted' : ok ? 'success' : 'failure';
    metrics.webhookAttempts.labels(outcome).inc();
    if (outcome === 'success') metrics.webhookLatency.observe(Math.max(0, (Date.now() - Date.parse(p.c)) / 1000));
    log.info({ request_id: requestId, delivery: p.d, attempt: p.n, outcome, status: out.statusCode, duration_ms: durationMs }, 'webhook delivery attempt');
    return {
      out,
      record: { d: p.d, w: p.w, n: p.n, e: p.e, t: p.t, c: p.c, b: ok ? null : p.b, r: requestId, s: out.statusCode, x: out.error, ms: durationMs, at: attemptedAt.toISOString() },
    };
  }

  return async (payload, helpers) => {
    const batch = attemptsOf(payload);
    if (batch === null) {
      log.error({ job: helpers.job.id }, 'webhooks__deliver: malformed payload; dropped');
      return;
    }
    if (stopping.aborted) {
      for (const p of batch) await giveBack(p, 250);
      return;
    }
    // Asked for every attempt: a job run again after a crash finds its recorded attempts `done`.
    const targets = await beginAttempts(db.background, batch);
    const abort = AbortSignal.any([stopping, helpers.abortSignal]);
    const made = await Promise.all(batch.map((p, i) => attempt(p, targets[i], abort)));
    const records: AttemptRecord[] = [];
    for (const [i, m] of made.entries()) {
      if (m === null) continue;
      if (m.out.interrupted) {
        log.info({ delivery: batch[i].d, attempt: batch[i].n }, 'webhooks__deliver: stopping mid-attempt; the attempt is given back');
        await giveBack(batch[i], 0);
      } else {
        records.push(m.record);
      }
    }
    if (records.length === 0) return;
    const statuses = await recordAttempts(db.background, records, config.webhookRetryScheduleMs);
    for (const [i, status] of statuses.entries()) {
      const r = records[i];
      if (status === 'retry') noteDue(config.webhookRetryScheduleMs[r.n - 1] ?? 0);
      if (status === 'failed') log.warn({ delivery: r.d, webhook: r.w, attempt: r.n, error: r.x, status: r.s }, 'webhook delivery failed for good');
    }
  };
}
