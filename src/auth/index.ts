/**
 * The auth area (issue 3: accounts and sessions; OAuth lives beside it in oauth/):
 * routes of interface §4.2 and two worker tasks:
 * - `auth__send_email`: the emails of contract §4 (mail.ts);
 * - `auth__purge`: hourly housekeeping (auth.purge_expired), one pending job for all
 *   instances, re-enqueued by itself.

 */
import type { Task, TaskList } from 'graphile-worker';
import type { Area, Deps } from '../core/area.ts';
import { purgeExpired, schedulePurge } from './db.ts';
import { sendEmailTask } from './mail.ts';
import { dummyHash } from './passwords.ts';
import { registerAuthRoutes } from './routes.ts';
import { registerAdminSessionRoutes } from './admin-sessions.ts';
import { registerOAuthRoutes } from './oauth/index.ts';

const PURGE_EVERY_SECONDS = 3600;

function purgeTask(deps: Deps): Task {
  return async () => {
    const counts = await purgeExpired(deps.db.sql);
    deps.log.info({ purged: counts }, 'auth: expired rows purged');
    await schedulePurge(deps.db.sql, PURGE_EVERY_SECONDS);
  };
}

export const authArea: Area = {
  name: 'auth',
  async register(app, deps) {
    // Make the dummy hash now, so the first sign-in with an unknown address costs no more than any other.
    void dummyHash();
    registerAuthRoutes(app, deps);
    registerAdminSessionRoutes(app, deps);
    registerOAuthRoutes(app, deps);
    // A pending purge keeps its time (preserve_run_at): restarts do not postpone it.
    await schedulePurge(deps.db.sql, PURGE_EVERY_SECONDS).catch((err: unknown) =>
      deps.log.warn({ err }, 'auth: could not schedule the purge job; the next start will'),
    );
  },
  tasks(deps): TaskList {
    return { auth__send_email: sendEmailTask(deps.config, deps.log), auth__purge: purgeTask(deps) };
  },
};
