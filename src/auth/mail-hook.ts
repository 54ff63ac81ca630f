/**
 * The send-email hook (AUTH_HOOK_SEND_EMAIL, docs/emails.md): when set, the mails go to it
 * instead of SMTP, with GoTrue's event {user, email_data: {token, token_hash, redirect_to,
 * email_action_type, site_url, token_new, token_hash_new}} so a Supabase project's hook
 * works unchanged. Two forms, as GoTrue's:
 *   a SQL function   auth.run_send_email_hook (sql/fixtures/auth/mail.sql) calls it;
 *   a URL            POSTed the JSON, signed as Standard Webhooks (GoTrue's hooks,
 *                    standard-webhooks.ts) with each key of AUTH_HOOK_SEND_EMAIL_SECRET
 *                    (`v1,whsec_<base64 key>`); the webhook-id is the mail's, the same
 *                    on every attempt.
 *                    The address rules are the webhooks' (never link-local; loopback and
 *                    private addresses refused with WEBHOOK_DENY_PRIVATE), within
 *                    WEBHOOK_TIMEOUT_MS.
 * The hook runs in the mail task, after the request was answered (the mails go through the
 * outbox). A refusal (a 4xx answer, or the function's `{error: …}`) is final: logged, the
 * mail dropped. Anything else that fails (5xx, network, timeout, a function that raises or
 * is missing) throws, and graphile-worker tries the job again later (5 attempts).
 */
import type postgres from 'postgres';
import type { RuntimeConfig, StandardHook } from '../core/config.ts';
import type { Sql } from '../core/db.ts';
import type { Logger } from '../core/log.ts';
import { addressGuard, type AddressGuard } from '../webhooks/address.ts';
import { post } from '../webhooks/deliver.ts';
import { standardWebhookHeaders } from './standard-webhooks.ts';

export interface EmailData {
  token: string;
  token_hash: string;
  redirect_to: string;
  email_action_type: string;
  site_url: string;
  token_new: string;
  token_hash_new: string;
}

export interface SendEmailEvent {
  user: unknown;
  email_data: EmailData;
}

/** A hook failure the job must not retry (the hook refused the mail). */
export class HookRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HookRefused';
  }
}

const guards = new Map<boolean, AddressGuard>();

async function postHook(config: RuntimeConfig, hook: Extract<StandardHook, { kind: 'http' }>, messageId: string, event: SendEmailEvent): Promise<void> {
  const body = JSON.stringify(event);
  let guard = guards.get(config.webhookDenyPrivate);
  if (guard === undefined) guards.set(config.webhookDenyPrivate, (guard = addressGuard(config.webhookDenyPrivate)));
  const r = await post(
    hook.url,
    Buffer.from(body),
    { 'content-type': 'application/json', ...standardWebhookHeaders(hook.secrets, body, messageId) },
    config.webhookTimeoutMs,
    new AbortController().signal,
    guard,
  );
  if (r.statusCode !== null && r.statusCode >= 200 && r.statusCode < 300) return;
  if (r.statusCode !== null && r.statusCode >= 400 && r.statusCode < 500) throw new HookRefused(`the send-email hook answered ${r.statusCode}`);
  throw new Error(`the send-email hook failed: ${r.statusCode !== null ? `answered ${r.statusCode}` : (r.error ?? 'no answer')}`);
}

interface HookRow {
  status: 'ok' | 'raised' | 'refused' | 'invalid';
  message: string | null;
}

async function callFunction(sql: Sql, fn: string, event: SendEmailEvent): Promise<void> {
  const [row] = await sql<HookRow[]>`select * from auth.run_send_email_hook(${fn}, ${sql.json(event as unknown as postgres.JSONValue)})`;
  if (row.status === 'ok') return;
  if (row.status === 'refused') throw new HookRefused(`the send-email hook refused the mail: ${row.message ?? ''}`);
  throw new Error(`the send-email hook ${row.status === 'raised' ? 'raised' : 'is invalid'}: ${row.message ?? ''}`);
}

/** Hand one mail to the hook; throws HookRefused (final) or another error (retry). */
export async function sendThroughHook(config: RuntimeConfig, sql: Sql | null, messageId: string, event: SendEmailEvent, log: Logger): Promise<void> {
  const hook = config.authHookSendEmail!;
  if (hook.kind === 'sql') {
    if (sql === null) throw new Error('the send-email hook needs the database');
    await callFunction(sql, hook.fn, event);
  } else {
    await postHook(config, hook, messageId, event);
  }
  log.debug({ kind: event.email_data.email_action_type }, 'email handed to the send-email hook');
}
