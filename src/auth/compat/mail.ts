/**
 * SUPABASE_COMPAT: the mail of POST /auth/v1/otp and POST /auth/v1/recover, as GoTrue's: one
 * link to GET /auth/v1/verify (with `type` and `redirect_to`, so that the session lands at
 * the application's page, where supabase-js picks it up) and the 6-digit code beside it.
 * Without the setting no job carries `compat`, and the interface's mails are unchanged.
 * The body is the app's template of the kind (../templates), the code its `{{ .Token }}`.
 */
import type { RuntimeConfig } from '../../core/config.ts';

export interface CompatMailFields {
  sealed_code: string;
  redirect_to: string;
  /** The GoTrue verification type the link carries: magiclink, signup, recovery or email_change. */
  type: string;
  /** email_change only: the account's current address (the mail goes to the new one). */
  email?: string;
}

export function isCompatFields(v: unknown): v is CompatMailFields {
  if (typeof v !== 'object' || v === null) return false;
  const o = v as Record<string, unknown>;
  return typeof o.sealed_code === 'string' && typeof o.redirect_to === 'string' && typeof o.type === 'string' && (o.email === undefined || typeof o.email === 'string');
}

/** The GoTrue-shaped link of a compat mail: GET /auth/v1/verify with its type and redirect. */
export function compatLink(config: Pick<RuntimeConfig, 'apiExternalUrl'>, token: string, f: CompatMailFields): string {
  const p = new URLSearchParams({ token, type: f.type, redirect_to: f.redirect_to });
  return `${config.apiExternalUrl}/auth/v1/verify?${p.toString()}`;
}
