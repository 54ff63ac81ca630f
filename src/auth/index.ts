/**
 * The auth area (accounts and sessions): the routes of docs/api/auth.md, one file per flow
 * in flows/ (what they share: flows/room.ts), registered by the list below, and three worker tasks:
 * - `auth__send_email`: the emails of docs/api/auth.md (mail.ts);
 * - `auth__send_sms`: phone codes through the send-SMS hook (flows/sms.ts);
 * - `auth__purge`: hourly housekeeping (auth.purge_expired, and auth.purge_audit_log for
 *   AUTH_AUDIT_RETENTION_DAYS), one pending job for all instances, re-enqueued by itself.

 */
import type { TaskList } from 'graphile-worker';
import type { Area, Deps } from '../core/area.ts';
import { periodic } from '../worker/periodic.ts';
import { purgeAuditLog, purgeExpired } from './db.ts';
import { sendEmailTask } from './mail.ts';
import { loadTemplates, type MailTemplates } from './templates/index.ts';
import { dummyHash } from './passwords.ts';
import { registerSupabaseCompat } from './compat/routes.ts';
import type { AuthFlow } from './flows/room.ts';
import { registerSignupRoutes } from './flows/signup.ts';
import { registerTokenRoutes } from './flows/token.ts';
import { registerAnonymousRoutes } from './flows/anonymous.ts';
import { registerUserRoutes } from './flows/user.ts';
import { registerLogoutRoutes } from './flows/logout.ts';
import { registerRecoveryRoutes } from './flows/recovery.ts';
import { registerMagicLinkRoutes } from './flows/magiclink.ts';
import { registerVerifyRoutes } from './flows/verify.ts';
import { registerMfaRoutes } from './flows/mfa.ts';
import { registerOAuthRoutes } from './flows/oauth.ts';
import { registerAdminUserRoutes } from './flows/admin-users.ts';
import { registerAdminSessionRoutes } from './flows/admin-sessions.ts';
import { registerOtpRoutes } from './flows/otp.ts';
import { sendSmsTask } from './flows/sms.ts';
import { registerPasskeyRoutes } from './flows/passkeys.ts';

/**
 * The flows, one line each: a new flow is a file in flows/ exporting an `AuthFlow`
 * (`(app, deps) => void`; `authRoom(deps)` gives it the shared gates and parsing), one
 * import above and one line here. The order does not matter to routing.
 */
const FLOWS: readonly AuthFlow[] = [
  registerSignupRoutes, // POST /signup
  registerTokenRoutes, // POST /token (password and refresh_token grants)
  registerAnonymousRoutes, // POST /anonymous
  registerUserRoutes, // GET, PATCH, PUT /user
  registerLogoutRoutes, // POST /logout
  registerRecoveryRoutes, // POST /recover, /recover/confirm
  registerMagicLinkRoutes, // POST /magiclink, GET /magiclink/verify
  registerVerifyRoutes, // GET /verify
  registerMfaRoutes, // /factors…, /admin/users/{id}/factors…, /admin/audit
  registerOAuthRoutes, // GET /authorize, /user/identities/authorize, GET and POST /callback
  registerAdminUserRoutes, // /admin/users…, /invite, /admin/generate_link
  registerAdminSessionRoutes, // /admin/users/{id}/sessions…
  registerOtpRoutes, // POST /otp, /verify (codes by email, phone sign-in)
  registerPasskeyRoutes, // /passkeys…, /admin/users/{id}/passkeys…
];

const purge = periodic({
  name: 'auth__purge',
  everySeconds: 3600,
  run: async (sql, deps) => ({ ...(await purgeExpired(sql)), ...(await purgeAuditLog(sql, deps.config.authAuditRetentionDays)) }),
  done: 'auth: expired rows purged',
});

/** The app's email templates, read once per configuration: a broken one stops the start (docs/emails.md). */
const templatesOf = new WeakMap<object, MailTemplates>();
function templates(config: Deps['config']): MailTemplates {
  let t = templatesOf.get(config);
  if (t === undefined) templatesOf.set(config, (t = loadTemplates(config.authTemplatesDir.path, config.authTemplatesDir.required)));
  return t;
}

export const authArea: Area = {
  name: 'auth',
  async register(app, deps) {
    // Make the dummy hash now, so the first sign-in with an unknown address costs no more than any other.
    void dummyHash();
    templates(deps.config);
    // SUPABASE_COMPAT: first, so that its onRoute hook sees the interface's routes.
    if (deps.config.supabaseCompat) registerSupabaseCompat(app, deps);
    for (const register of FLOWS) register(app, deps);
    // A pending purge keeps its time (preserve_run_at): restarts do not postpone it.
    await purge.start(deps);
  },
  tasks(deps): TaskList {
    return {
      auth__send_email: sendEmailTask(deps.config, deps.log, { sql: deps.db.sql, templates: templates(deps.config) }),
      auth__send_sms: sendSmsTask(deps),
      auth__purge: purge.task(deps),
    };
  },
};
