/**
 * The worked examples of docs/api/schedules.md, run as written against a real plinth: the
 * SQL of each example section is read from the page and run as the database owner (as a
 * migration would), then what the page says of it is checked — the nightly cleanup's next
 * tick is 03:00 Paris time and a run of it deletes only old rows; an order of a rolled-back
 * transaction gets no receipt, a committed one exactly one.
 */
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startApp } from '../helpers/app.ts';
import { blocksUnder } from '../docs/snippets.ts';
import { waitFor } from '../functions/helpers.ts';

const page = readFileSync(fileURLToPath(new URL('../../docs/api/schedules.md', import.meta.url)), 'utf8');
const app = await startApp(t);
const sql = app.db.sql;
const runs = async (name: string) => (await app.call('GET', `/api/runs?name=${name}`, { token: app.serviceKey })).body as Array<Record<string, any>>;

async function runExample(t: Test, heading: string): Promise<void> {
  const blocks = blocksUnder(page, heading, 'sql');
  t.equal(blocks.length, 1, `${heading}: one SQL block`);
  for (const b of blocks) await sql.unsafe(b.text).simple();
}

t.test('a nightly cleanup', async (t) => {
  await runExample(t, '## Example: a nightly cleanup');
  const list = await app.call('GET', '/api/schedules', { token: app.serviceKey });
  const s = (list.body as Array<Record<string, any>>).find((x) => x.name === 'nightly-cleanup');
  t.match(s, { cron: '0 3 * * *', target: 'sql:public.cleanup', payload: { days: 30 }, options: { timezone: 'Europe/Paris', backfill: '12 hours' } });
  const [{ paris }] = await sql<{ paris: string }[]>`select to_char(${s!.next_run_at}::timestamptz at time zone 'Europe/Paris', 'HH24:MI') as paris`;
  t.equal(paris, '03:00', 'the next tick is 03:00 in Paris');
  await sql`insert into public.sessions_log (created_at) select now() - make_interval(days => d) from generate_series(0, 40, 5) d`;
  t.equal((await app.call('POST', '/api/schedules/nightly-cleanup/run', { token: app.serviceKey })).status, 202);
  t.ok(await waitFor(async () => (await runs('nightly-cleanup')).length === 1, 30_000, 100), 'the run is in the log');
  t.equal((await runs('nightly-cleanup'))[0].outcome, 'succeeded');
  const [left] = await sql<{ n: number; oldest: number }[]>`
    select count(*)::int as n, max(extract(epoch from now() - created_at) / 86400)::float8 as oldest from public.sessions_log`;
  t.equal(left.n, 6, 'the rows of 0 to 25 days stay; those of 30 days and more went');
  t.ok(left.oldest < 30, 'none older than 30 days is left');
});

t.test('a queue fed by a trigger', async (t) => {
  await runExample(t, '## Example: a queue fed by a trigger');
  await sql
    .begin(async (tx) => {
      await tx`insert into public.orders (total) values (10)`;
      throw new Error('the order is abandoned');
    })
    .catch(() => {});
  const [{ id }] = await sql<{ id: string }[]>`insert into public.orders (total) values (20) returning id::text`;
  t.ok(await waitFor(async () => (await runs('receipts')).length === 1, 30_000, 100), 'one run');
  t.equal((await runs('receipts'))[0].outcome, 'succeeded');
  t.ok(await waitFor(async () => (await sql`select 1 from graphile_worker.jobs where queue_name like 'plinth:queue:receipts:%'`).length === 0, 10_000, 100), 'nothing else queued');
  const outbox = await sql<{ order_id: string; kind: string }[]>`select order_id::text, kind from public.outbox`;
  t.same(outbox, [{ order_id: id, kind: 'receipt' }], 'exactly one receipt, for the committed order only');
});
