/**
 * The `auth__send_sms` task (docs/api/auth.md, "The send-SMS hook"). SQL enqueued the job in
 * the same transaction as the code (auth.send_phone_code), the code sealed in it; the task
 * unseals it just before the send and hands GoTrue's event `{user, sms: {otp}}` to the hook
 * of AUTH_HOOK_SEND_SMS:
 * - `pg-functions://<db>/<schema>/<function>`: the application's SQL function
 *   `(event jsonb) returns jsonb` (auth.run_send_sms_hook), which sends the SMS or stores it;
 * - an https URL (http on loopback): a POST of the event as JSON, signed as Standard
 *   Webhooks (GoTrue's hooks): `webhook-id`, `webhook-timestamp` and `webhook-signature:
 *   v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` with each AUTH_HOOK_SEND_SMS_SECRET
 *   key; any 2xx is a send.
 * A failed send (the function raises or answers `{error}`, a non-2xx, a network error, or
 * over HOOK_TIMEOUT_MS) throws, and graphile-worker retries the job (3 attempts). A job
 * without a recipient (an unknown number without create_user) ends at once: the request did
 * the same work as any other. The code is never logged.
 */
import type { Task } from 'graphile-worker';
import type { Deps } from '../../core/area.ts';
import type { StandardHook } from '../../core/config.ts';
import { standardWebhookHeaders } from '../standard-webhooks.ts';
import { unseal } from '../tokens.ts';
import { runSendSmsHook, smsHookUser } from './otp-db.ts';

/** The hook gets this long per send. */
export const SMS_HOOK_TIMEOUT_MS = 5000;

interface SmsPayload {
  to: string | null;
  user_id?: string;
  sealed_code?: string;
}

function isPayload(p: unknown): p is SmsPayload {
  if (typeof p !== 'object' || p === null) return false;
  const o = p as Record<string, unknown>;
  return o.to === null || (typeof o.to === 'string' && typeof o.user_id === 'string' && typeof o.sealed_code === 'string');
}

async function sendOverHttp(hook: Extract<StandardHook, { kind: 'http' }>, event: Record<string, unknown>): Promise<void> {
  const body = JSON.stringify(event);
  const res = await fetch(hook.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...standardWebhookHeaders(hook.secrets, body) },
    body,
    redirect: 'manual',
    signal: AbortSignal.timeout(SMS_HOOK_TIMEOUT_MS),
  });
  await res.arrayBuffer().catch(() => undefined);
  if (res.status < 200 || res.status > 299) throw new Error(`the send-SMS hook answered ${res.status}`);
}

async function sendThroughSql(deps: Pick<Deps, 'db'>, fn: string, event: Record<string, unknown>): Promise<void> {
  const q = runSendSmsHook(deps.db.sql, fn, event);
  const timer = setTimeout(() => void q.cancel(), SMS_HOOK_TIMEOUT_MS);
  let rows;
  try {
    rows = await q;
  } finally {
    clearTimeout(timer);
  }
  const r = rows[0];
  if (r.status !== 'ok') throw new Error(`the send-SMS hook ${r.status === 'invalid' ? 'is unusable' : 'failed'}: ${r.message ?? ''}`);
}

export function sendSmsTask(deps: Pick<Deps, 'config' | 'db' | 'log'>): Task {
  const { config, log } = deps;
  return async (payload, helpers) => {
    if (!isPayload(payload)) {
      log.error({ job: helpers.job.id }, 'auth__send_sms: malformed payload; dropped');
      return;
    }
    if (payload.to === null) return;
    const hook = config.authHookSendSms;
    if (hook === null) {
      log.warn({ job: helpers.job.id }, 'auth__send_sms: AUTH_HOOK_SEND_SMS is unset; the code is not sent');
      return;
    }
    let otp: string;
    try {
      otp = unseal(config.secret, payload.sealed_code as string);
    } catch (err) {
      log.error({ err, job: helpers.job.id }, 'auth__send_sms: code cannot be unsealed; dropped');
      return;
    }
    const user = await smsHookUser(deps.db.sql, payload.user_id as string);
    if (user === null) return; // deleted since: nobody to sign in
    const event = { user, sms: { otp } };
    if (hook.kind === 'sql') await sendThroughSql(deps, hook.fn, event);
    else await sendOverHttp(hook, event);
    log.debug({ job: helpers.job.id }, 'SMS code handed to the send-SMS hook');
  };
}
