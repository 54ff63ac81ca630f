/**
 * SUPABASE_COMPAT: the mail of POST /auth/v1/otp and POST /auth/v1/recover, as GoTrue's: one
 * link to GET /auth/v1/verify (with `type` and `redirect_to`, so that the session lands at
 * the application's page, where supabase-js picks it up) and the 6-digit code beside it.
 * Without the setting no job carries `compat`, and the interface's mails are unchanged.
 */
import type { RuntimeConfig } from '../../core/config.ts';

/** A mail as ../mail.ts sends it (its `Email`, structurally: imported, it would close a cycle). */
export interface CompatEmail {
  subject: string;
  text: string;
  link: string;
}

export interface CompatMailFields {
  sealed_code: string;
  redirect_to: string;
  /** The GoTrue verification type the link carries: magiclink, signup or recovery. */
  type: string;
}

export function isCompatFields(v: unknown): v is CompatMailFields {
  if (typeof v !== 'object' || v === null) return false;
  const o = v as Record<string, unknown>;
  return typeof o.sealed_code === 'string' && typeof o.redirect_to === 'string' && typeof o.type === 'string';
}

export function composeCompatEmail(config: Pick<RuntimeConfig, 'apiExternalUrl'>, token: string, code: string, f: CompatMailFields): CompatEmail {
  const p = new URLSearchParams({ token, type: f.type, redirect_to: f.redirect_to });
  const link = `${config.apiExternalUrl}/auth/v1/verify?${p.toString()}`;
  if (f.type === 'recovery') {
    return {
      subject: 'Reset your password',
      link,
      text:
        `Choose a new password by opening this link:\n\n${link}\n\nOr enter this code: ${code}\n\n` +
        'The link and the code are valid for 1 hour and work once. If you did not ask for them, you can ignore this email; your password stays as it is.\n',
    };
  }
  return {
    subject: f.type === 'signup' ? 'Confirm your signup' : 'Your sign-in link',
    link,
    text:
      `Sign in by opening this link:\n\n${link}\n\nOr enter this code: ${code}\n\n` +
      'The link and the code are valid for 1 hour and work once. If you did not ask for them, you can ignore this email.\n',
  };
}
