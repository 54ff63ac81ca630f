/**
 * The attempts of a batch (docs/api/webhooks.md, docs/architecture.md Jobs): the outbox drain
 * (outbox.ts) takes batches of up to 100 attempts of one webhook (claim_batches, which also
 * read where they go: url and secret, never stored with the batch, and dropped the attempts no
 * longer due), and makes each batch's attempts here, concurrently, then ends the batch in one
 * transaction (finish_batch), which records every attempt and queues the next one
 * (WEBHOOK_RETRY_SCHEDULE; +1 s, +4 s by default) or ends the delivery. Each attempt POSTs the
 * exact bytes with
 *   Content-Type: application/json
 *   User-Agent: service-webhooks/1.0
 *   X-Webhook-Id: <delivery id>            (the same on every attempt: receivers drop duplicates)
 *   X-Webhook-Signature: sha256=<hex>      (HMAC-SHA256 of the bytes sent; only with a secret)
 * within WEBHOOK_TIMEOUT_MS (never to a link-local address, nor with WEBHOOK_DENY_PRIVATE to a
 * loopback or private one: address.ts, checked before connecting), on kept-alive sockets of
 * the deliveries' own (never the service's other HTTP clients'). A non-2xx, a network error or
 * a timeout is a failed attempt.
 *
 * A service that stops (its HTTP server closes: `stopping` aborts) cuts its attempts in
 * flight short and gives them back unrecorded (finish_batch without their outcome): the
 * next instance makes the same attempt at once, with the same X-Webhook-Id (the receiver may
 * have seen the cut one). When the database cannot be reached to end a batch, it is tried
 * again; an instance that stops meanwhile leaves the batch to the others (taken over once it
 * has left the registry, marked as a possible repeat).
 */
import { createHmac } from 'node:crypto';
import type { ClientRequest } from 'node:http';
import https from 'node:https';
import type { Deps } from '../core/area.ts';
import { hooks as spanHooks } from '../core/spans.ts';
import { addressGuard, type AddressGuard } from './address.ts';
import { finishBatch, requeueItems, type AttemptOutcomeRecord, type Batch, type BatchItem } from './db.ts';

// Not an ESM import of node:http: that loads Node's bundled undici (see src/core/http.ts).
const http = process.getBuiltinModule('node:http');

export const USER_AGENT = 'service-webhooks/1.0';

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

/** What making a batch needs from its service instance. */
export interface BatchContext {
  deps: Deps;
  guard: AddressGuard;
  /** A retry was queued, due in `ms` (this instance's outbox drain polls then). */
  noteDue: (ms: number) => void;
}

export function batchContext(deps: Deps, noteDue: (ms: number) => void): BatchContext {
  return { deps, guard: addressGuard(deps.config.webhookDenyPrivate), noteDue };
}

/** One attempt: POST, log, measure. */
async function attempt(ctx: BatchContext, batch: Batch, p: BatchItem, abort: AbortSignal): Promise<{ out: AttemptOutcome; record: AttemptOutcomeRecord }> {
  const { log, config, metrics } = ctx.deps;
  const body = Buffer.from(p.b, 'utf8');
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'x-webhook-id': p.d,
  };
  if (batch.secret) headers['x-webhook-signature'] = signature(batch.secret, body);
  const attemptedAt = new Date();
  const t0 = performance.now();
  const span = spanHooks?.root('webhook delivery', { 'plinth.delivery_id': p.d, 'plinth.attempt': p.n, 'plinth.request_id': p.r ?? '' }) ?? null;
  const out = await post(batch.url!, body, headers, config.webhookTimeoutMs, abort, ctx.guard);
  const durationMs = Math.round(performance.now() - t0);
  span?.end(out.error ?? undefined);
  const ok = out.statusCode !== null && out.statusCode >= 200 && out.statusCode < 300;
  const outcome = out.interrupted ? 'interrupted' : ok ? 'success' : 'failure';
  metrics.webhookAttempts.labels(outcome).inc();
  if (outcome === 'success') metrics.webhookLatency.observe(Math.max(0, (Date.now() - Date.parse(p.c)) / 1000));
  if (log.isLevelEnabled('info')) {
    log.info({ request_id: p.r, delivery: p.d, attempt: p.n, outcome, status: out.statusCode, duration_ms: durationMs }, 'webhook delivery attempt');
  }
  return { out, record: { d: p.d, s: out.statusCode, x: out.error, ms: durationMs, at: attemptedAt.toISOString() } };
}

const FINISH_RETRY_MS = 1000;

/**
 * Make a batch's attempts and end it. `stopping` aborts the attempts in flight (they are
 * given back); never rejects.
 */
export async function makeBatch(ctx: BatchContext, batch: Batch, stopping: AbortSignal): Promise<void> {
  const { db, log, config } = ctx.deps;
  // The webhook is gone or paused (an orphan batch), or the service is stopping: every attempt goes back.
  const made = batch.url === null || stopping.aborted ? [] : await Promise.all(batch.items.map((p) => attempt(ctx, batch, p, stopping)));
  const records: AttemptOutcomeRecord[] = [];
  for (const m of made) {
    if (m.out.interrupted) log.info({ delivery: m.record.d }, 'webhooks: stopping mid-attempt; the attempt is given back');
    else records.push(m.record);
  }
  const giveBackMs = stopping.aborted && made.length === 0 ? 250 : 0;
  for (;;) {
    try {
      const statuses = await finishBatch(db.background, batch.id, db.instanceId, records, config.webhookRetryScheduleMs, giveBackMs);
      for (const [i, status] of statuses.entries()) {
        const p = batch.items[i];
        if (status === 'retry') ctx.noteDue(config.webhookRetryScheduleMs[p.n - 1] ?? 0);
        if (status === 'failed') {
          const r = records.find((x) => x.d === p.d);
          log.warn({ delivery: p.d, webhook: p.w, attempt: p.n, error: r?.x, status: r?.s }, 'webhook delivery failed for good');
        }
        if (status === 'taken') log.warn({ batch: batch.id }, 'webhooks: another instance took this batch over; its outcomes are not recorded here');
      }
      return;
    } catch (err) {
      log.warn({ err, batch: batch.id }, 'webhooks: could not record a batch of attempts; trying again');
      if (stopping.aborted) return;
      await new Promise((r) => setTimeout(r, FINISH_RETRY_MS));
    }
  }
}

/**
 * The `webhooks__deliver` task of former versions: a job left in the queue by an upgrade
 * puts its attempts back into the outbox, where the drains take them.
 */
export function legacyDeliverTask(deps: Deps) {
  return async (payload: unknown) => {
    const items = (payload as { items?: unknown } | null)?.items;
    const list = Array.isArray(items) ? items : typeof (payload as { d?: unknown } | null)?.d === 'string' ? [payload] : [];
    if (list.length > 0) await requeueItems(deps.db.background, list);
  };
}
