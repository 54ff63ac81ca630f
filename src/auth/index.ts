/**
 * The auth area (accounts and sessions; OAuth lives beside it in oauth/):
 * the routes of docs/api/auth.md and two worker tasks:
 * - `auth__send_email`: the emails of docs/api/auth.md (mail.ts);
 * - `auth__purge`: hourly housekeeping (auth.purge_expired, and auth.purge_audit_log for
 *   AUTH_AUDIT_RETENTION_DAYS), one pending job for all instances, re-enqueued by itself.

 */
import type { TaskList } from 'graphile-worker';
import type { Area, Deps } from '../core/area.ts';
import { periodic } from '../core/periodic.ts';
import { purgeAuditLog, purgeExpired } from './db.ts';
import { sendEmailTask } from './mail.ts';
import { loadTemplates, type MailTemplates } from './templates/index.ts';
import { dummyHash } from './passwords.ts';
import { registerAuthRoutes } from './routes.ts';
import { registerSupabaseCompat } from './compat/routes.ts';
import { registerAdminSessionRoutes } from './admin-sessions.ts';
import { registerAdminUserRoutes } from './admin-users.ts';
import { registerOAuthRoutes } from './oauth/index.ts';

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
    registerAuthRoutes(app, deps);
    registerAdminSessionRoutes(app, deps);
    registerAdminUserRoutes(app, deps);
    registerOAuthRoutes(app, deps);
    // A pending purge keeps its time (preserve_run_at): restarts do not postpone it.
    await purge.start(deps);
  },
  tasks(deps): TaskList {
    return { auth__send_email: sendEmailTask(deps.config, deps.log, { sql: deps.db.sql, templates: templates(deps.config) }), auth__purge: purge.task(deps) };
  },
};
