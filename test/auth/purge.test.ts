/**
 * Housekeeping: the `auth__purge` job is scheduled once for all instances, removes rows
 * that can no longer change an answer, and schedules its next run an hour later.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { refresh, signUp, sleep } from './helpers.ts';

const PURGE_JOBS = `select j.id, extract(epoch from j.run_at - now())::int as in_seconds, j.locked_at
  from graphile_worker._private_jobs j join graphile_worker._private_tasks k on k.id = j.task_id
  where k.identifier = 'auth__purge'`;

t.test('auth__purge', async (t) => {
  const db = await createTestDatabase(t);
  const app = await startApp(t, { db, env: { AUTH_RATE_LIMIT: '0' } });
  await startApp(t, { db, worker: false, env: { AUTH_RATE_LIMIT: '0' } });
  const jobs = await db.sql.unsafe(PURGE_JOBS);
  t.equal(jobs.length, 1, 'one pending purge for two instances');
  t.ok(jobs[0].in_seconds > 3500 && jobs[0].in_seconds <= 3600, 'in an hour');

  const old = await signUp(app);
  const live = await signUp(app);
  // Make `old` a family whose token expired eight days ago.
  await db.sql`update auth_private.refresh_tokens set expires_at = now() - interval '8 days'
    where session_id in (select id from auth_private.sessions where user_id = ${old.session.user.id})`;
  await db.sql`update auth_private.sessions set created_at = now() - interval '40 days' where user_id = ${old.session.user.id}`;
  await db.sql`insert into auth_private.rate_limits (bucket, ip, hits, updated_at) values ('auth', '192.0.2.9', '{}', now() - interval '2 days')`;
  t.same((await refresh(app, old.session.refresh_token)).body, { error: 'refresh token expired' }, 'before the purge: expired');

  await db.sql`update graphile_worker._private_jobs set run_at = now() where id = ${jobs[0].id}`;
  let next: { id: string; in_seconds: number }[] = [];
  for (let i = 0; i < 40; i++) {
    await sleep(250);
    next = (await db.sql.unsafe(PURGE_JOBS)) as unknown as typeof next;
    if (next.length === 1 && next[0].id !== jobs[0].id) break;
  }
  t.equal(next.length, 1, 'still one pending purge');
  t.not(next[0].id, jobs[0].id, 'the job ran and scheduled its successor');
  t.ok(next[0].in_seconds > 3500, 'an hour later');

  const [{ n }] = await db.sql`select count(*)::int as n from auth_private.sessions where user_id = ${old.session.user.id}`;
  t.equal(n, 0, 'the dead family is gone');
  const [{ r }] = await db.sql`select count(*)::int as r from auth_private.rate_limits where ip = '192.0.2.9'`;
  t.equal(r, 0, 'the idle rate-limit row is gone');
  t.same((await refresh(app, old.session.refresh_token)).body, { error: 'invalid refresh token' }, 'after the purge: unknown');
  t.equal((await refresh(app, live.session.refresh_token)).status, 200, 'live sessions are untouched');
});
