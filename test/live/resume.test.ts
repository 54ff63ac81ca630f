/**
 * Resuming a live query without doubling or losing a change (decision 0300), on every
 * path: the fast path (the writer's statement computes the delta), a re-run, and an
 * `as: subscriber` group on its fast path and re-run. Each race is made deterministic:
 *
 * - a delta held back: the instance holds the subscription messages PostgreSQL sends (its
 *   test hook `heldDeltas`) while a row is written and published, the client library
 *   reconnects and loads the whole result (which holds the row), then the held delta
 *   arrives. It must not be applied again.
 * - a result behind the table: the poller is stopped while a row is written (the table has
 *   it, the subscription's stored result does not), the client reconnects and loads, then
 *   the poller runs and the delta arrives. It must be applied once (a REST reload already
 *   had the row: the old resume doubled it).
 *
 * Then the rows must be the table's, each once.
 */
import t from 'tap';
import WebSocket from 'ws';
import { startApp, type TestApp } from '../helpers/app.ts';
import { open, waitFor } from './helpers.ts';
import { createClient, type LiveOptions, type LiveQuery, type Row } from '../../src/client/index.ts';
import { canonical } from '../../src/client/live.ts';

/** A `ws` WebSocket class that records the seq of every subscription message its sockets receive. */
function recording(seqs: number[]) {
  return class extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols);
      // Registered before the client library's onmessage: seen first.
      this.on('message', (data: Buffer) => {
        const m = JSON.parse(data.toString('utf8'));
        if (typeof m.seq === 'number' && (m.type === undefined || m.type === 'overflow')) seqs.push(m.seq);
      });
    }
  };
}

const SUBSCRIPTIONS = [
  { id: 'fast', query: 'select id, v from things', as: null, poller: false },
  { id: 'rerun', query: 'select distinct id, v from things', as: null, poller: true },
  { id: 'group_fast', query: 'select id, v from things', as: 'subscriber', poller: true },
  { id: 'group_rerun', query: 'select distinct id, v from things', as: 'subscriber', poller: true },
] as const;

/** The subscription's (or its one group's) stored seq, and whether its stored result holds row `rowId`. */
async function stored(app: TestApp, id: string, group: boolean, rowId = 0): Promise<{ seq: number; has: boolean }> {
  const has = JSON.stringify([{ id: rowId }]);
  const [row] = group
    ? await app.db.sql<{ seq: number; has: boolean }[]>`select coalesce(max(seq), 0)::int as seq, coalesce(bool_or(snapshot @> ${has}::text::jsonb), false) as has
        from live_private.groups where query_id = ${id}`
    : await app.db.sql<{ seq: number; has: boolean }[]>`select seq::int, snapshot @> ${has}::text::jsonb as has from live_private.subscriptions where query_id = ${id}`;
  return row;
}

t.test('a resume never applies a change twice and never misses one', async (t) => {
  const app = await startApp(t, { worker: false });
  const sql = app.db.sql;
  await sql.unsafe(`create table public.things (id int primary key, v text not null);
    grant select, insert on public.things to anon;
    insert into public.things values (1, 'one');`);
  for (const s of SUBSCRIPTIONS) {
    await sql`select live.subscribe(${s.id}, ${s.query}, 'delta', null, ${s.as === null ? null : JSON.stringify({ as: s.as })}::text::jsonb)`;
  }
  const live = app.service.app.live!;
  const client = createClient(app.url, app.anonKey, { auth: { persistSession: false } });
  // The REST catalog reloads on the DDL notification: wait for the table.
  await waitFor(async () => (await app.call('GET', '/rest/v1/things', { apikey: app.anonKey })).status === 200, 10_000, 'the table over REST');

  let next = 2;
  for (const s of SUBSCRIPTIONS) {
    await t.test(s.id, async (t) => {
      const seqs: number[] = [];
      const q: LiveQuery = client.live(s.id, {
        refetch: () => client.from('things').select('id, v'),
        minDelayMs: 20,
        maxDelayMs: 100,
        WebSocket: recording(seqs) as unknown as LiveOptions['WebSocket'],
      });
      t.teardown(() => q.close());
      const loads = () => q.refetches + ((q as { snapshots?: number }).snapshots ?? 0);
      // A load is done when its change event came (a refetch counts itself when it starts).
      let changes = 0;
      q.on('change', () => changes++);
      const reloaded = async () => {
        const n = loads();
        const c = changes;
        q.reconnect();
        await waitFor(() => q.status === 'subscribed' && loads() === n + 1 && changes > c, 10_000, 'the reload after the reconnect');
      };
      const table = async () => (await sql<Row[]>`select id, v from things order by id`).map((r) => ({ ...r }));
      const sorted = (rows: Row[]) => [...rows].sort((a, b) => (a.id as number) - (b.id as number));
      const settled = async () => canonical(sorted(q.rows)) === canonical(await table());
      await waitFor(() => q.status === 'subscribed' && loads() === 1, 10_000, 'the first load');
      // A re-run subscription's stored result may be one run behind the table: its delta follows.
      await waitFor(settled, 10_000, 'the rows as the table has them');

      // A delta held back past the resume: the reload holds its row already.
      live.heldDeltas = [];
      const held = next++;
      let target = 0;
      try {
        await sql`insert into things values (${held}, 'held')`;
        target = (await waitFor(async () => {
          const r = await stored(app, s.id, s.as !== null, held);
          return r.has ? r : null;
        }, 10_000, 'the change published (and held)'))!.seq;
        await reloaded();
        t.ok(
          q.rows.some((r) => r.id === held),
          'the reload holds the row',
        );
      } finally {
        live.releaseDeltas();
      }
      await waitFor(() => seqs.includes(target), 10_000, 'the held delta reached the socket');
      // And the client library handled it (its listener runs after the recorder's).
      await new Promise((r) => setImmediate(r));
      t.same(sorted(q.rows), await table(), 'the held delta was not applied again: no row twice, none missing');

      if (s.poller) {
        // A stored result behind the table: the reload is older than the change, whose delta follows.
        await live.poller.stop();
        const late = next++;
        let resumed = false;
        try {
          const { seq: at } = await stored(app, s.id, s.as !== null);
          await sql`insert into things values (${late}, 'late')`;
          await reloaded();
          live.poller.start();
          resumed = true;
          await waitFor(() => seqs.includes(at + 1), 10_000, 'the late delta reached the socket');
        } finally {
          if (!resumed) live.poller.start();
        }
        await new Promise((r) => setImmediate(r));
        t.same(sorted(q.rows), await table(), 'the late delta was applied once: no row twice, none missing');
      }

      // Later changes go on as deltas.
      const after = next++;
      await sql`insert into things values (${after}, 'after')`;
      await waitFor(() => q.rows.some((r) => r.id === after), 10_000, 'a later change');
      t.same(sorted(q.rows), await table(), 'and a later change');
      q.close();
    });
  }
});

t.test('the snapshot message: the stored result and its seq, on request; rows null in notify mode', async (t) => {
  const app = await startApp(t, { worker: false });
  const sql = app.db.sql;
  await sql.unsafe(`create table public.s (id int primary key);
    grant select on public.s to anon;
    insert into public.s values (1);
    select live.subscribe('s', 'select id from s');
    select live.subscribe('s_mine', 'select id from s', 'delta', null, '{"as": "subscriber"}');
    select live.subscribe('s_count', 'select count(*) as n from s', 'notify');`);
  const key = { apikey: app.anonKey };
  const c = await open(app, '/ws/s', { query: key });
  t.same(await c.next(), { type: 'subscribed', query_id: 's', client_id: c.messages[0].client_id, snapshot: true }, 'subscribed says snapshots are answered');
  await sql`insert into public.s values (2)`;
  t.equal((await c.next()).seq, 1, 'nothing unasked for comes before the delta');
  c.send({ type: 'snapshot' });
  t.same(await c.next(), { type: 'snapshot', query_id: 's', seq: 1, rows: [{ id: 1 }, { id: 2 }] }, 'the stored result at its seq');

  const g = await open(app, '/ws/s_mine', { query: key });
  await g.next();
  g.send({ type: 'snapshot' });
  t.same(await g.next(), { type: 'snapshot', query_id: 's_mine', seq: 0, rows: [{ id: 1 }, { id: 2 }] }, "a group's result (its own seq)");
  await sql`insert into public.s values (3)`;
  t.equal((await g.next()).seq, 1);
  g.send({ type: 'snapshot' });
  t.same(await g.next(), { type: 'snapshot', query_id: 's_mine', seq: 1, rows: [{ id: 1 }, { id: 2 }, { id: 3 }] }, 'and after a change');

  const n = await open(app, '/ws/s_count', { query: key });
  await n.next();
  n.send({ type: 'snapshot' });
  t.same(await n.next(), { type: 'snapshot', query_id: 's_count', seq: null, rows: null }, 'notify mode: nothing to send');
  for (const x of [c, g, n]) x.close();
});
