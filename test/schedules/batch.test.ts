/**
 * The `sql:` jobs of one queue that a worker takes together run as one batch statement
 * (sql/fixtures/schedules/batch.sql): each job still runs once, as its role with its own
 * request id, in its own subtransaction (a failing one is retried and recorded alone), with
 * its own run-log row; a batch past its timeout rolls back whole and each job runs alone.
 * The runs are counted by outcome at /metrics (plinth_job_runs_total), parsed.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { captureLog } from '../helpers/log-capture.ts';
import { parseMetrics, sample } from '../helpers/metrics.ts';
import { waitFor } from '../functions/helpers.ts';

const db = await createTestDatabase(t);
await db.sql.unsafe(`
  create table public.done (id serial primary key, q text, i int, tx bigint, role text, request_id text, claims jsonb);
  grant insert on public.done to service_role; grant usage on sequence public.done_id_seq to service_role;
  create function public.work(p jsonb) returns void language plpgsql as $$
  begin
    if (p->>'fail')::boolean then raise exception 'bad %', p->>'i'; end if;
    insert into public.done (q, i, tx, role, request_id, claims)
      values ('many', (p->>'i')::int, txid_current(), current_user, current_setting('request.id', true), current_setting('request.jwt.claims', true)::jsonb);
  end $$;
  create function public.nap(p jsonb) returns void language sql as $$
    select pg_sleep(0.3);
    insert into public.done (q, i, tx, role) values ('naps', (p->>'i')::int, txid_current(), current_user) $$;
  grant execute on function public.work(jsonb), public.nap(jsonb) to service_role;
  select plinth.queue('many', 'sql:public.work', '{"max_attempts": 2, "backoff": 0}');
  select plinth.queue('naps', 'sql:public.nap', '{"max_attempts": 1, "timeout": 1}');
`);
// Queued before the worker starts, so that it takes them together.
await db.sql`select count(plinth.enqueue('many', jsonb_build_object('i', g, 'fail', g in (7, 19)))) from generate_series(1, 30) g`;

const { lines, log } = captureLog();
const app = await startApp(t, { db, log, workerConcurrency: 16 });
const runs = async (name: string) => (await app.call('GET', `/api/runs?name=${name}&limit=1000`, { token: app.serviceKey })).body as Array<Record<string, any>>;
const metrics = async () => parseMetrics((await app.call('GET', '/metrics', { token: app.serviceKey })).body);

t.test('jobs taken together: each runs once, as its role, recorded alone; a failing one retried alone', async (t) => {
  t.ok(await waitFor(async () => (await runs('many')).filter((r) => r.outcome !== 'retrying').length === 30, 30_000, 100), 'all 30 ended');
  const all = await runs('many');
  const ok = all.filter((r) => r.outcome === 'succeeded');
  t.equal(ok.length, 28, '28 succeeded');
  t.same(all.filter((r) => r.outcome !== 'succeeded').map((r) => [r.attempt, r.outcome, r.error]).sort(), [
    [1, 'retrying', 'bad 19'],
    [1, 'retrying', 'bad 7'],
    [2, 'failed', 'bad 19'],
    [2, 'failed', 'bad 7'],
  ], 'the two failing jobs: retried, then failed, each with its own error');
  const rows = await db.sql<{ i: number; tx: string; role: string; request_id: string; claims: { role: string } }[]>`select i, tx::text, role, request_id, claims from public.done where q = 'many' order by i`;
  t.same(rows.map((r) => r.i), Array.from({ length: 30 }, (_, k) => k + 1).filter((i) => i !== 7 && i !== 19), 'each other job ran once; the failing ones left nothing');
  t.ok(new Set(rows.map((r) => r.tx)).size < rows.length, `batched: ${rows.length} calls in ${new Set(rows.map((r) => r.tx)).size} transactions`);
  t.same([...new Set(rows.map((r) => r.role))], ['service_role'], 'each call as the queue\'s role');
  t.same([...new Set(rows.map((r) => r.claims.role))], ['service_role'], 'with its claims');
  t.same(rows.map((r) => r.request_id).sort(), ok.map((r) => r.request_id).sort(), 'each call\'s request id is its run\'s, one to one');
  t.equal(new Set(ok.map((r) => r.job_id)).size, 28, 'one run-log row per job');
  t.ok(ok.every((r) => typeof r.duration_ms === 'number' && r.started_at <= r.finished_at), 'each with its own times');

  const m = await metrics();
  const runsOf = (outcome: string) => sample(m, 'plinth_job_runs_total', { kind: 'queue', name: 'many', outcome });
  t.same([runsOf('succeeded'), runsOf('retrying'), runsOf('failed')], [28, 2, 2], '/metrics counts the runs by outcome');
});

t.test('a batch past its timeout rolls back whole; each job then runs alone with its own', async (t) => {
  // Eight jobs committed together: taken together, 8 × 0.3 s is past the queue's 1 s timeout.
  await db.sql`select count(plinth.enqueue('naps', jsonb_build_object('i', g))) from generate_series(1, 8) g`;
  t.ok(await waitFor(async () => (await runs('naps')).length === 8, 30_000, 100), 'all 8 recorded');
  t.same([...new Set((await runs('naps')).map((r) => r.outcome))], ['succeeded'], 'each succeeded alone');
  t.ok(lines.some((l) => l.msg === 'schedules: a batch of runs failed as a whole; each runs alone' && l.name === 'naps'), 'the batch timed out');
  const rows = await db.sql<{ i: number; tx: string }[]>`select i, tx::text from public.done where q = 'naps' order by i`;
  t.same(rows.map((r) => r.i), [1, 2, 3, 4, 5, 6, 7, 8], 'each ran once: nothing of the batch stayed');
  t.equal(new Set(rows.map((r) => r.tx)).size, 8, 'each in a transaction of its own');
  t.equal(sample(await metrics(), 'plinth_job_runs_total', { kind: 'queue', name: 'naps', outcome: 'succeeded' }), 8);
});
