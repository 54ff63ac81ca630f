/**
 * Standard Webhooks signing, as GoTrue signs its hooks (the send-email and send-SMS hooks'
 * URL form): headers `webhook-id`, `webhook-timestamp` (Unix seconds) and
 * `webhook-signature`: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` under each key,
 * separated by spaces (several keys: rotation). The keys are the base64 after `whsec_`
 * (StandardHook's `secrets`); the standardwebhooks libraries verify the result.
 */
import { createHmac, randomUUID } from 'node:crypto';

/** The headers that sign `body`; `id` defaults to a fresh `msg_<uuid>` (pass the same id on every attempt of one message). */
export function standardWebhookHeaders(keys: readonly string[], body: string, id = `msg_${randomUUID()}`, now = Math.floor(Date.now() / 1000)): Record<string, string> {
  const signed = `${id}.${now}.${body}`;
  const signatures = keys.map((k) => `v1,${createHmac('sha256', Buffer.from(k, 'base64')).update(signed).digest('base64')}`);
  return { 'webhook-id': id, 'webhook-timestamp': String(now), 'webhook-signature': signatures.join(' ') };
}
