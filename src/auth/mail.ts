/**
 * The `auth__send_email` task (contract §4). SQL enqueued the job in the same transaction
 * as the token it carries; the payload holds the token sealed. The task unseals it just
 * before sending and builds a plain-text body with exactly one link carrying `token=`:
 *   verification  API_EXTERNAL_URL/auth/v1/verify?token=…            (24 hours)
 *   magic_link    API_EXTERNAL_URL/auth/v1/magiclink/verify?token=…  (1 hour, once)
 *   recovery      SITE_URL/reset-password?token=…                     (1 hour, once)
 *
 * Delivery: nodemailer over SMTP_URL. `smtps://` is TLS from the first byte, with the
 * certificate verified. `smtp://` promises no TLS: STARTTLS is used when the server offers
 * it but its certificate is not checked (better than clear text against a passive reader,
 * no worse otherwise). nodemailer's URL query options override both, e.g.
 * `smtp://host:587?requireTLS=true&tls.rejectUnauthorized=true` or `?ignoreTLS=true`.
 * Without SMTP_URL the email is written to the log (the one place a clear token may
 * appear, development only). A failed send throws, and graphile-worker retries the job.
 */
import nodemailer, { type Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import type { Task } from 'graphile-worker';
import type { RuntimeConfig } from '../core/config.ts';
import type { Logger } from '../core/log.ts';
import { unseal } from './tokens.ts';

export type EmailKind = 'verification' | 'recovery' | 'magic_link';

export interface EmailPayload {
  kind: EmailKind;
  to: string;
  sealed_token: string;
}

export interface Email {
  subject: string;
  text: string;
  link: string;
}

export function composeEmail(config: Pick<RuntimeConfig, 'apiExternalUrl' | 'siteUrl'>, kind: EmailKind, token: string): Email {
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
      return {
        subject: 'Your sign-in link',
        link,
        text: `Sign in by opening this link:\n\n${link}\n\nThe link is valid for 1 hour and works once. If you did not ask for it, you can ignore this email.\n`,
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

function isPayload(p: unknown): p is EmailPayload {
  const o = p as Partial<EmailPayload> | null;
  return (
    typeof o === 'object' && o !== null && typeof o.to === 'string' && typeof o.sealed_token === 'string' &&
    (o.kind === 'verification' || o.kind === 'recovery' || o.kind === 'magic_link')
  );
}

export function createTransport(smtpUrl: string): Transporter {
  const smtps = smtpUrl.startsWith('smtps:');
  return nodemailer.createTransport({
    url: smtpUrl,
    ...(smtps ? {} : { tls: { rejectUnauthorized: false } }),
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 20_000,
  } as SMTPTransport.Options);
}

export function sendEmailTask(config: RuntimeConfig, log: Logger): Task {
  const transport = config.smtpUrl === null ? null : createTransport(config.smtpUrl);
  return async (payload, helpers) => {
    if (!isPayload(payload)) {
      log.error({ job: helpers.job.id }, 'auth__send_email: malformed payload; dropped');
      return;
    }
    let token: string;
    try {
      token = unseal(config.secret, payload.sealed_token);
    } catch (err) {
      // Sealed with another secret (JWT_SECRET changed): no retry can open it.
      log.error({ err, job: helpers.job.id, kind: payload.kind }, 'auth__send_email: token cannot be unsealed; dropped');
      return;
    }
    const email = composeEmail(config, payload.kind, token);
    if (transport === null) {
      log.info({ email: { to: payload.to, subject: email.subject, body: email.text } }, 'email (SMTP_URL unset, not sent)');
      return;
    }
    await transport.sendMail({ from: config.mailFrom, to: payload.to, subject: email.subject, text: email.text });
    log.debug({ kind: payload.kind, job: helpers.job.id }, 'email sent');
  };
}
