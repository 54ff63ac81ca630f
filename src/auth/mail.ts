/**
 * The `auth__send_email` task (docs/api/auth.md). SQL enqueued the job in the same transaction
 * as the token it carries; the payload holds the token sealed. The task unseals it just
 * before sending and builds a plain-text body with exactly one link carrying `token=`:
 *   verification  API_EXTERNAL_URL/auth/v1/verify?token=…            (24 hours)
 *   magic_link    API_EXTERNAL_URL/auth/v1/magiclink/verify?token=…  (1 hour, once; with its
 *                 6-digit code beside it, `token` of the Email: one grant, flows/otp.ts)
 *   recovery      SITE_URL/reset-password?token=…                     (1 hour, once)
 *   invite        API_EXTERNAL_URL/auth/v1/magiclink/verify?token=…  (24 hours, once)
 * Two more shapes of job:
 *   account_changed  the notice to the former address after an email or password change
 *                    (PATCH /auth/v1/user): plain text, no token, no link;
 *   no recipient     (`to` null) a recovery or magic-link request for an unknown address,
 *                    or one over MAIL_RATE_LIMIT_PER_HOUR: enqueued so that every request
 *                    does the same work; the task ends without sending anything.
 *
 * Delivery: nodemailer over SMTP_URL. `smtps://` is TLS from the first byte, with the
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
import type { Logger } from '../core/log.ts';
import { unseal } from './tokens.ts';
import { composeCompatEmail, isCompatFields } from './compat/mail.ts';

/** The emails that carry a one-time token. */
export type EmailKind = 'verification' | 'recovery' | 'magic_link' | 'invite';

export interface EmailPayload {
  kind: EmailKind;
  to: string;
  sealed_token: string;
  /** A magic-link mail's 6-digit code, sealed (flows/otp.ts): one grant with the link. */
  sealed_code?: string;
  /** SUPABASE_COMPAT only: the code and redirect of a GoTrue-shaped mail (compat/mail.ts). */
  compat?: unknown;
}

/** A request for an unknown or limited address: the same work, nothing sent. */
export interface NoEmailPayload {
  kind: EmailKind;
  to: null;
}

export interface AccountChangedPayload {
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
  /** The 6-digit code beside the link (GoTrue's `{{ .Token }}`), when the mail has one. */
  token?: string;
}

export function composeEmail(config: Pick<RuntimeConfig, 'apiExternalUrl' | 'siteUrl'>, kind: EmailKind, token: string, code: string | null = null): Email {
  const t = encodeURIComponent(token);
  switch (kind) {
    case 'verification': {
      const link = `${config.apiExternalUrl}/auth/v1/verify?token=${t}`;
      return {
        subject: 'Confirm your email address',
        link,
        text: `Confirm your email address by opening this link:\n\n${link}\n\nThe link is valid for 24 hours. If you did not sign up, you can ignore this email.\n`,
      };
    }
    case 'magic_link': {
      const link = `${config.apiExternalUrl}/auth/v1/magiclink/verify?token=${t}`;
      if (code !== null) {
        return {
          subject: 'Your sign-in link',
          link,
          token: code,
          text:
            `Sign in by opening this link:\n\n${link}\n\nOr enter this code: ${code}\n\n` +
            'The link and the code are valid for 1 hour and work once (either one spends the other). If you did not ask for them, you can ignore this email.\n',
        };
      }
      return {
        subject: 'Your sign-in link',
        link,
        text: `Sign in by opening this link:\n\n${link}\n\nThe link is valid for 1 hour and works once. If you did not ask for it, you can ignore this email.\n`,
      };
    }
    case 'invite': {
      const link = `${config.apiExternalUrl}/auth/v1/magiclink/verify?token=${t}`;
      return {
        subject: 'You have been invited',
        link,
        text: `You have been invited to create an account. Accept the invitation by opening this link:\n\n${link}\n\nThe link is valid for 24 hours and works once. If you did not expect it, you can ignore this email.\n`,
      };
    }
    case 'recovery': {
      const link = `${config.siteUrl}/reset-password?token=${t}`;
      return {
        subject: 'Reset your password',
        link,
        text: `Choose a new password by opening this link:\n\n${link}\n\nThe link is valid for 1 hour and works once. If you did not ask for it, you can ignore this email; your password stays as it is.\n`,
      };
    }
    default: {
      const never: never = kind;
      throw new Error(`unknown email kind ${String(never)}`);
    }
  }
}

/** The notice of an email or password change, to the former address: plain, no link. */
export function composeAccountChanged(p: Pick<AccountChangedPayload, 'email_changed' | 'password_changed' | 'new_email'>): { subject: string; text: string } {
  const what: string[] = [];
  if (p.email_changed) what.push(p.new_email === null ? 'The email address of your account was changed.' : `The email address of your account was changed to ${p.new_email}.`);
  if (p.password_changed) what.push('The password of your account was changed.');
  return {
    subject: p.email_changed ? 'The email address of your account was changed' : 'The password of your account was changed',
    text:
      `${what.join('\n')}\n\nEvery other session of the account was signed out.\n\n` +
      'If you made this change, you can ignore this email. If you did not, someone else may have access to your account: ' +
      'contact the application that sent this email.\n',
  };
}

const TOKEN_KINDS: ReadonlySet<unknown> = new Set(['verification', 'recovery', 'magic_link', 'invite']);

function isPayload(p: unknown): p is SendEmailPayload {
  if (typeof p !== 'object' || p === null) return false;
  const o = p as Record<string, unknown>;
  if (o.kind === 'account_changed') {
    return typeof o.to === 'string' && typeof o.email_changed === 'boolean' && typeof o.password_changed === 'boolean' &&
      (o.new_email === null || typeof o.new_email === 'string');
  }
  if (!TOKEN_KINDS.has(o.kind)) return false;
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

export function sendEmailTask(config: RuntimeConfig, log: Logger): Task {
  let transport: Promise<Transporter> | null = null;
  return async (payload, helpers) => {
    if (!isPayload(payload)) {
      log.error({ job: helpers.job.id }, 'auth__send_email: malformed payload; dropped');
      return;
    }
    // No recipient: a request for an unknown or limited address, which sends nothing.
    if (payload.to === null) return;
    let email: { subject: string; text: string };
    if (payload.kind === 'account_changed') {
      email = composeAccountChanged(payload);
    } else {
      let token: string;
      try {
        token = unseal(config.secret, payload.sealed_token);
      } catch (err) {
        // Sealed with another secret (JWT_SECRET changed): no retry can open it.
        log.error({ err, job: helpers.job.id, kind: payload.kind }, 'auth__send_email: token cannot be unsealed; dropped');
        return;
      }
      // Jobs from before the code moved to the top level carry it in `compat` only.
      const sealedCode = payload.sealed_code ?? (isCompatFields(payload.compat) ? payload.compat.sealed_code : undefined);
      const code = typeof sealedCode === 'string' ? unseal(config.secret, sealedCode) : null;
      email = isCompatFields(payload.compat) && code !== null
        ? { ...composeCompatEmail(config, token, code, payload.compat), token: code }
        : composeEmail(config, payload.kind, token, code);
    }
    if (config.smtpUrl === null) {
      if (config.devMode) log.info({ email: { to: payload.to, subject: email.subject, body: email.text } }, 'email (SMTP_URL unset, not sent)');
      else log.warn({ email: { kind: payload.kind, to: payload.to } }, 'email not sent: SMTP_URL is unset');
      return;
    }
    transport ??= createTransport(config.smtpUrl);
    await (await transport).sendMail({ from: config.mailFrom, to: payload.to, subject: email.subject, text: email.text });
    log.debug({ kind: payload.kind, job: helpers.job.id }, 'email sent');
  };
}
