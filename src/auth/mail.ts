/**
 * The `auth__send_email` task (docs/api/auth.md, docs/emails.md). SQL enqueued the job in the
 * same transaction as the token it carries; the payload holds the token sealed. The task
 * unseals it just before sending and renders the app's template of the kind (templates/:
 * HTML and text, in the recipient's language, with GoTrue's variables; the recipient's
 * account read as it is now), whose `{{ .ConfirmationURL }}` is the one link with `token=`:
 *   verification  API_EXTERNAL_URL/auth/v1/verify?token=…            (24 hours)
 *   magic_link    API_EXTERNAL_URL/auth/v1/magiclink/verify?token=…  (1 hour, once)
 *   recovery      SITE_URL/reset-password?token=…                     (1 hour, once)
 *   invite        API_EXTERNAL_URL/auth/v1/magiclink/verify?token=…  (24 hours, once)
 *   email_change  (SUPABASE_COMPAT only) GET /auth/v1/verify?type=email_change, to the new address (1 hour, once)
 * Two more shapes of job:
 *   account_changed  the notice to the former address after an email or password change
 *                    (PATCH /auth/v1/user): plain text, no token, no link;
 *   no recipient     (`to` null) a recovery or magic-link request for an unknown address,
 *                    or one over MAIL_RATE_LIMIT_PER_HOUR: enqueued so that every request
 *                    does the same work; the task ends without sending anything.
 *
 * Delivery: the send-email hook when AUTH_HOOK_SEND_EMAIL is set (mail-hook.ts), else
 * nodemailer over SMTP_URL. `smtps://` is TLS from the first byte, with the
 * certificate verified. `smtp://` promises no TLS: STARTTLS is used when the server offers
 * it but its certificate is not checked (better than clear text against a passive reader,
 * no worse otherwise). nodemailer's URL query options override both, e.g.
 * `smtp://host:587?requireTLS=true&tls.rejectUnauthorized=true` or `?ignoreTLS=true`.
 * Without SMTP_URL nothing is sent: in development mode (no JWT_SECRET) the whole email is
 * written to the log (the one place a clear token may appear); otherwise the log says only
 * that an email of that kind to that address was not sent, never its body or link (a live
 * link in a production log is a sign-in for whoever reads the log). A failed send throws,
 * and graphile-worker retries the job.
 */
import type { Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import type { Task } from 'graphile-worker';
import type { RuntimeConfig } from '../core/config.ts';
import type { Sql } from '../core/db.ts';
import type { Logger } from '../core/log.ts';
import { unseal } from './tokens.ts';
import { compatLink, isCompatFields } from './compat/mail.ts';
import { loadTemplates, localesOf, type MailTemplates, type TemplateKind } from './templates/index.ts';
import { HookRefused, sendThroughHook, type EmailData } from './mail-hook.ts';

/** The emails that carry a one-time token. */
export type EmailKind = 'verification' | 'recovery' | 'magic_link' | 'invite' | 'email_change';

interface MailContext {
  /** The Accept-Language of the request that caused the mail (its context's), if any. */
  accept_language?: string | null;
}

export interface EmailPayload extends MailContext {
  kind: EmailKind;
  to: string;
  sealed_token: string;
  /** The 6-digit code of the mail, sealed, when it has one (`{{ .Token }}`). */
  sealed_code?: string;
  /** SUPABASE_COMPAT only: the code and redirect of a GoTrue-shaped mail (compat/mail.ts). */
  compat?: unknown;
}

/** A request for an unknown or limited address: the same work, nothing sent. */
export interface NoEmailPayload {
  kind: EmailKind;
  to: null;
}

export interface AccountChangedPayload extends MailContext {
  kind: 'account_changed';
  /** The address the account had before the change. */
  to: string;
  email_changed: boolean;
  password_changed: boolean;
  /** The new address when the email changed. */
  new_email: string | null;
}

export type SendEmailPayload = EmailPayload | NoEmailPayload | AccountChangedPayload;

export interface Email {
  subject: string;
  text: string;
  link: string;
  /** The 6-digit code beside the link (`{{ .Token }}`), when the mail has one. */
  token?: string;
}

/** The link of an interface (non-compat) mail. */
export function linkOf(config: Pick<RuntimeConfig, 'apiExternalUrl' | 'siteUrl'>, kind: EmailKind, token: string): string {
  const t = encodeURIComponent(token);
  switch (kind) {
    case 'verification':
      return `${config.apiExternalUrl}/auth/v1/verify?token=${t}`;
    case 'magic_link':
    case 'invite':
      return `${config.apiExternalUrl}/auth/v1/magiclink/verify?token=${t}`;
    case 'recovery':
      return `${config.siteUrl}/reset-password?token=${t}`;
    case 'email_change': // SUPABASE_COMPAT only, whose jobs carry `compat` (compatLink)
      return `${config.apiExternalUrl}/auth/v1/verify?token=${t}&type=email_change`;
    default: {
      const never: never = kind;
      throw new Error(`unknown email kind ${String(never)}`);
    }
  }
}

const TEMPLATE_OF: Record<EmailKind, TemplateKind> = {
  verification: 'confirmation',
  recovery: 'recovery',
  magic_link: 'magic_link',
  invite: 'invite',
  email_change: 'email_change',
};
const ACTION_OF: Record<EmailKind, string> = { verification: 'signup', recovery: 'recovery', magic_link: 'magiclink', invite: 'invite', email_change: 'email_change' };
const COMPAT_TEMPLATE_OF: Record<string, TemplateKind> = { signup: 'confirmation', recovery: 'recovery', email_change: 'email_change' };
const BUILT_IN = loadTemplates(null);

/** plinth's own mail of a kind (no template folder), as the task sends it without one. */
export function composeEmail(config: Pick<RuntimeConfig, 'apiExternalUrl' | 'siteUrl'>, kind: EmailKind, token: string, code: string | null = null): Email {
  const link = linkOf(config, kind, token);
  const m = BUILT_IN.render(TEMPLATE_OF[kind], [], { ConfirmationURL: link, Token: code ?? '', TokenHash: token, SiteURL: config.siteUrl });
  return { subject: m.subject, text: m.text, link, ...(code === null ? {} : { token: code }) };
}

/** The notice of an email or password change, to the former address: plain, no link. */
export function composeAccountChanged(p: Pick<AccountChangedPayload, 'email_changed' | 'password_changed' | 'new_email'>): { subject: string; text: string } {
  const m = BUILT_IN.render(p.email_changed ? 'email_changed_notification' : 'password_changed_notification', [], noticeData(p, ''));
  return { subject: m.subject, text: m.text };
}

function noticeData(p: Pick<AccountChangedPayload, 'email_changed' | 'password_changed' | 'new_email'>, to: string): Record<string, unknown> {
  return { Email: p.new_email ?? to, OldEmail: p.email_changed ? to : '', NewEmail: p.new_email ?? '', EmailChanged: p.email_changed, PasswordChanged: p.password_changed };
}

const TOKEN_KINDS: ReadonlySet<unknown> = new Set(['verification', 'recovery', 'magic_link', 'invite', 'email_change']);

function isPayload(p: unknown): p is SendEmailPayload {
  if (typeof p !== 'object' || p === null) return false;
  const o = p as Record<string, unknown>;
  if (o.accept_language !== undefined && o.accept_language !== null && typeof o.accept_language !== 'string') return false;
  if (o.kind === 'account_changed') {
    return typeof o.to === 'string' && typeof o.email_changed === 'boolean' && typeof o.password_changed === 'boolean' &&
      (o.new_email === null || typeof o.new_email === 'string');
  }
  if (!TOKEN_KINDS.has(o.kind)) return false;
  if (o.sealed_code !== undefined && o.sealed_code !== null && typeof o.sealed_code !== 'string') return false;
  return o.to === null || (typeof o.to === 'string' && typeof o.sealed_token === 'string');
}

/** The SMTP transport; nodemailer is loaded at the first email, not at start. */
export async function createTransport(smtpUrl: string): Promise<Transporter> {
  const smtps = smtpUrl.startsWith('smtps:');
  const { default: nodemailer } = await import('nodemailer');
  return nodemailer.createTransport({
    url: smtpUrl,
    ...(smtps ? {} : { tls: { rejectUnauthorized: false } }),
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  } as SMTPTransport.Options);
}

interface Prepared {
  template: TemplateKind;
  data: Record<string, unknown>;
  emailData: EmailData;
}

/** A mail's template and its data (GoTrue's names), and the hook's email_data; throws when a token cannot be unsealed. */
function prepare(config: RuntimeConfig, p: EmailPayload | AccountChangedPayload, user: Record<string, unknown> | null): Prepared {
  const meta = user?.user_metadata;
  const common = { SiteURL: config.siteUrl, SendingTo: p.to, Data: typeof meta === 'object' && meta !== null ? meta : {} };
  const emailData = { token: '', token_hash: '', redirect_to: config.siteUrl, site_url: `${config.apiExternalUrl}/auth/v1`, token_new: '', token_hash_new: '' };
  if (p.kind === 'account_changed') {
    const template = p.email_changed ? 'email_changed_notification' : 'password_changed_notification';
    return { template, data: { ...common, Email: p.new_email ?? p.to, ...noticeData(p, p.to) }, emailData: { ...emailData, email_action_type: template } };
  }
  const token = unseal(config.secret, p.sealed_token);
  const compat = isCompatFields(p.compat) ? p.compat : null;
  const sealedCode = compat?.sealed_code ?? p.sealed_code ?? null;
  const code = sealedCode === null ? '' : unseal(config.secret, sealedCode);
  const template = compat === null ? TEMPLATE_OF[p.kind] : (COMPAT_TEMPLATE_OF[compat.type] ?? 'magic_link');
  const redirectTo = compat?.redirect_to ?? config.siteUrl;
  const data = {
    ...common,
    ConfirmationURL: compat === null ? linkOf(config, p.kind, token) : compatLink(config, token, compat),
    Token: code,
    TokenHash: token,
    Email: typeof user?.email === 'string' ? user.email : p.to,
    RedirectTo: redirectTo,
    // An email change goes to the new address; `.Email` is the current one (GoTrue's).
    ...(compat?.email === undefined ? {} : { NewEmail: p.to }),
  };
  const action = compat?.type ?? ACTION_OF[p.kind];
  // An email change's secrets are the new address's (GoTrue's token_new / token_hash_new) and, single confirmation, the only ones.
  const fresh = action === 'email_change' ? { token_new: code, token_hash_new: token } : {};
  return { template, data, emailData: { ...emailData, token: code, token_hash: token, ...fresh, redirect_to: redirectTo, email_action_type: action } };
}

export interface SendEmailOptions {
  /** The database, for the recipient's account and the SQL hook (null: neither). */
  sql?: Sql | null;
  /** The app's templates (default: plinth's own). */
  templates?: MailTemplates;
}

export function sendEmailTask(config: RuntimeConfig, log: Logger, opts: SendEmailOptions = {}): Task {
  const sql = opts.sql ?? null;
  const templates = opts.templates ?? BUILT_IN;
  let transport: Promise<Transporter> | null = null;
  return async (payload, helpers) => {
    if (!isPayload(payload)) {
      log.error({ job: helpers.job.id }, 'auth__send_email: malformed payload; dropped');
      return;
    }
    // No recipient: a request for an unknown or limited address, which sends nothing.
    if (payload.to === null) return;
    const lookup = payload.kind === 'account_changed' ? (payload.new_email ?? payload.to) : isCompatFields(payload.compat) && payload.compat.email !== undefined ? payload.compat.email : payload.to;
    const user = sql === null ? null : ((await sql<{ u: Record<string, unknown> | null }[]>`select auth_private.mail_recipient(${lookup}) as u`)[0].u);
    let prepared: Prepared;
    try {
      prepared = prepare(config, payload, user);
    } catch (err) {
      // Sealed with another secret (JWT_SECRET changed): no retry can open it.
      log.error({ err, job: helpers.job.id, kind: payload.kind }, 'auth__send_email: token cannot be unsealed; dropped');
      return;
    }
    if (config.authHookSendEmail) {
      try {
        await sendThroughHook(config, sql, `msg_${helpers.job.id}`, { user: user ?? { email: payload.to }, email_data: prepared.emailData }, log);
      } catch (err) {
        if (!(err instanceof HookRefused)) throw err;
        log.error({ job: helpers.job.id, kind: payload.kind, reason: err.message }, 'auth__send_email: the send-email hook refused the mail; dropped');
      }
      return;
    }
    const locales = localesOf(prepared.data.Data && (prepared.data.Data as Record<string, unknown>).locale, payload.accept_language);
    const email = templates.render(prepared.template, locales, prepared.data);
    if (config.smtpUrl === null) {
      if (config.devMode) log.info({ email: { to: payload.to, subject: email.subject, body: email.text } }, 'email (SMTP_URL unset, not sent)');
      else log.warn({ email: { kind: payload.kind, to: payload.to } }, 'email not sent: SMTP_URL is unset');
      return;
    }
    transport ??= createTransport(config.smtpUrl);
    await (await transport).sendMail({ from: config.mailFrom, to: payload.to, subject: email.subject, text: email.text, ...(email.html === null ? {} : { html: email.html }) });
    log.debug({ kind: payload.kind, job: helpers.job.id, locale: email.locale }, 'email sent');
  };
}
