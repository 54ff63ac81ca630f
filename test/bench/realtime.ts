/**
 * Realtime table subscriptions (docs/api/realtime.md), measured against the service the
 * bench starts; the clients speak Supabase Realtime's protocol as realtime-js 2.x does
 * (Phoenix, vsn 2.0.0 frames, written here so that 1000 clients fit the driver process).
 *
 * - `realtime-changes`: 1000 clients (quick: 200) of 100 users (quick: 20), each with one
 *   table subscription (`INSERT` on an owner-only table under RLS, filter
 *   `owner=eq.<its user>`); a writer inserts rows for random users at 20 rows/s (open
 *   loop), each carrying the driver's clock; latency = arrival at a client − the writer's
 *   COMMIT acknowledgement, after a warm-up of one row per user (not counted: the first
 *   polls plan their statements on each pooled connection; the note gives the first row's
 *   latency). Every row must reach exactly the 10 clients of its owner, and no other. Goal
 *   p99 ≤ 50 ms.
 * - `realtime-write-cost`: single-row INSERTs from 8 connections into that table with those
 *   clients subscribed vs none (alternating rounds). Goal ≥ 0.8. The note gives the CPU
 *   per insert of the driver (the clients), the service and the database's backends on each
 *   side, deliveries included, and the least the deliveries alone can cost: a bare
 *   WebSocket frame per delivery (10 per insert), received and parsed, caps the ratio on
 *   these shared cores whatever plinth does; the note prints that ceiling, and the ratio
 *   of PostgreSQL's CPU per insert alone (all its backends; the writers' own).
 */
import postgres from 'postgres';
import WebSocket from 'ws';
import { pacedCalls } from './load.ts';
import type { CustomScenario, RunContext, RunResult } from './scenarios.ts';
import { cpuNow, cpuSince, procCpuMs } from './webhooks.ts';

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const uid = (u: number) => `00000000-0000-4000-8000-${String(u).padStart(12, '0')}`;

function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const TABLE = `drop table if exists public.bench_rt;
  create table public.bench_rt (id bigserial primary key, owner uuid not null, sent double precision not null);
  alter table public.bench_rt enable row level security;
  create policy own on public.bench_rt for select to authenticated using (owner = auth.uid());
  grant select on public.bench_rt to authenticated;`;

/** A client joined to `realtime:rt` with one table subscription; `onRow` hears each INSERT's row. */
function join(c: RunContext, token: string, user: string, onRow: (row: { owner: string; sent: number }, at: number) => void): Promise<WebSocket> {
  const url = `${c.serviceUrl.replace(/^http/, 'ws')}/realtime/v1/websocket?apikey=${c.anonKey}&vsn=2.0.0`;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    ws.once('open', () => {
      const config = { broadcast: { self: false, ack: false }, presence: { key: '', enabled: false }, postgres_changes: [{ event: 'INSERT', schema: 'public', table: 'bench_rt', filter: `owner=eq.${user}` }], private: false };
      ws.send(JSON.stringify(['1', '1', 'realtime:rt', 'phx_join', { config, access_token: token }]));
    });
    ws.on('message', (data, binary) => {
      const at = now();
      if (binary) return;
      const [, ref, , event, payload] = JSON.parse((data as Buffer).toString()) as [unknown, unknown, string, string, { status?: string; response?: unknown; data?: { record: { owner: string; sent: number } } }];
      if (event === 'phx_reply' && ref === '1') {
        if (payload.status === 'ok') resolve(ws);
        else reject(new Error(`join refused: ${JSON.stringify(payload.response)}`));
      } else if (event === 'postgres_changes' && payload.data !== undefined) {
        onRow(payload.data.record, at);
      }
    });
  });
}

async function openClients(c: RunContext, users: number, perUser: number, onRow: (client: number, row: { owner: string; sent: number }, at: number) => void): Promise<WebSocket[]> {
  const sockets: WebSocket[] = [];
  for (let u = 0; u < users; u++) {
    const token = await c.userToken(uid(u));
    const batch = await Promise.all(Array.from({ length: perUser }, (_, k) => join(c, token, uid(u), (row, at) => onRow(u * perUser + k, row, at))));
    sockets.push(...batch);
  }
  return sockets;
}

async function realtimeChanges(c: RunContext): Promise<RunResult> {
  const users = c.quick ? 20 : 100;
  const perUser = 10;
  const seconds = c.quick ? 2 : 5;
  const rate = 20;
  const sql = postgres(c.dbUrl, { max: 2, onnotice: () => {} });
  const acked = new Map<number, number>();
  const arrivals: Array<[number, number]> = [];
  let wrong = 0;
  let sockets: WebSocket[] = [];
  try {
    await sql.unsafe(TABLE);
    sockets = await openClients(c, users, perUser, (client, row, at) => {
      if (row.owner !== uid(Math.floor(client / perUser))) wrong++;
      arrivals.push([row.sent, at]);
    });
    const [{ groups }] = await sql`select count(*)::int as groups from live_private.groups g join live_private.subscriptions s using (query_id) where s.mode = 'changes'`;
    await sleep(300);
    /** `total` rows at `perSecond`, owners in turn; resolves when every delivery arrived (or 10 s passed). */
    const write = async (total: number, perSecond: number) => {
      await pacedCalls(total, perSecond, (i, sent) => sql`insert into public.bench_rt (owner, sent) values (${uid(i % users)}, ${sent})`.execute().then(() => acked.set(sent, now())));
      const end = Date.now() + 10_000;
      while (arrivals.length < total * perUser && Date.now() < end) await sleep(20);
      await sleep(200); // a delivery too many would arrive now
    };
    const latencies = () => arrivals.map(([sent, t]) => Math.max(0, t - (acked.get(sent) ?? t)));
    // Warm-up, not counted: the poller's statements are planned once per pooled connection
    // and lane, so the first polls after the joins are slower (the first delivery's latency
    // is in the note); one second of rows for every owner.
    await write(users, users);
    const warmDeliveries = arrivals.length;
    const firstSent = Math.min(...arrivals.map(([sent]) => sent));
    const firstMs = warmDeliveries > 0 ? Math.max(...arrivals.filter(([sent]) => sent === firstSent).map(([sent, t]) => t - (acked.get(sent) ?? t))) : null;
    const warmWrong = wrong;
    arrivals.length = 0;
    const total = rate * seconds;
    await write(total, rate);
    const expected = total * perUser;
    const fromCommit = latencies().sort((a, b) => a - b);
    const r1 = (x: number | null) => (x === null ? null : Math.round(x * 10) / 10);
    const got = arrivals.length;
    const p99 = r1(percentile(fromCommit, 99));
    const exact = got === expected && wrong === 0 && warmDeliveries === users * perUser && warmWrong === 0;
    return {
      status: !exact ? 'ERROR' : p99 !== null && p99 <= 50 ? 'PASS' : 'MISS',
      rps: got / seconds,
      p50_ms: r1(percentile(fromCommit, 50)),
      p99_ms: p99,
      baseline: 'goal p99 ≤ 50 ms (Supabase reports p95 184 ms for 500 clients)',
      note:
        `${users * perUser} Phoenix vsn 2.0.0 clients of ${users} users${c.quick ? ' (quick: 200 clients of 20 users)' : ''} in ${groups} groups, ` +
        `each one table subscription (INSERT, filter owner=eq.<user>, RLS owner-only); ${rate} rows/s for ${seconds} s; ` +
        `${got}/${expected} deliveries, ${wrong} to a client that may not read the row; p50/p99 from the writer's COMMIT acknowledgement; rps = deliveries/s; ` +
        `after a warm-up of one row per owner in 1 s (${warmDeliveries}/${users * perUser} deliveries; the first row's took ${firstMs === null ? '—' : firstMs.toFixed(1)} ms)`,
    };
  } finally {
    for (const ws of sockets) ws.terminate();
    await sql.unsafe('drop table if exists public.bench_rt').catch(() => {});
    await sql.end({ timeout: 2 });
  }
}

async function insertRate(sql: postgres.Sql, seconds: number, conns: number, users: number): Promise<{ rate: number; n: number }> {
  let n = 0;
  const end = now() + seconds * 1000;
  const started = now();
  await Promise.all(
    Array.from({ length: conns }, async () => {
      while (now() < end) {
        await sql`insert into public.bench_rt (owner, sent) values (${uid(Math.floor(Math.random() * users))}, 0)`;
        n++;
      }
    }),
  );
  return { rate: n / ((now() - started) / 1000), n };
}

/**
 * The least a delivery can cost on these cores: one WebSocket text frame of a
 * postgres_changes message sent by a bare `ws` server and received and parsed by a bare
 * `ws` client, both in this process; CPU µs per frame.
 */
async function bareFrameCpu(frames: number): Promise<number> {
  const { WebSocketServer } = await import('ws');
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
  await new Promise<void>((r) => server.once('listening', () => r()));
  const port = (server.address() as { port: number }).port;
  const frame = JSON.stringify([null, null, 'realtime:rt', 'postgres_changes', { ids: [1], data: { schema: 'public', table: 'bench_rt', commit_timestamp: new Date().toISOString(), type: 'INSERT', columns: [], record: { id: 123456, owner: uid(42), sent: 1764370000000.123 }, old_record: {}, errors: null } }]);
  try {
    const client = new WebSocket(`ws://127.0.0.1:${port}`, { perMessageDeflate: false });
    const peer = await new Promise<WebSocket>((r) => server.once('connection', (ws) => r(ws as unknown as WebSocket)));
    await new Promise<void>((r) => client.once('open', () => r()));
    let got = 0;
    const done = new Promise<void>((r) => client.on('message', (d) => {
      JSON.parse((d as Buffer).toString());
      if (++got === frames) r();
    }));
    const c0 = process.cpuUsage();
    for (let i = 0; i < frames; i++) peer.send(frame);
    await done;
    const c = process.cpuUsage(c0);
    client.terminate();
    return (c.user + c.system) / frames;
  } finally {
    server.close();
  }
}

/** The writers' pool's application_name: their backends' CPU is told apart from the service's. */
const WRITERS = 'bench-rt-writers';

/** CPU ms so far of the writers' backends, by pid (/proc). */
async function writerCpu(sql: postgres.Sql, db: string): Promise<Map<number, number>> {
  const rows = await sql<{ pid: number }[]>`select pid from pg_stat_activity where datname = ${db} and application_name = ${WRITERS}`;
  return new Map(rows.map((r) => [r.pid, procCpuMs(r.pid)]));
}

async function realtimeWriteCost(c: RunContext): Promise<RunResult> {
  const users = c.quick ? 20 : 100;
  const perUser = 10;
  const rounds = c.quick ? 1 : 5;
  const slice = c.quick ? 1 : 1.5;
  const conns = 8;
  const sql = postgres(c.dbUrl, { max: 1, onnotice: () => {} });
  // One pool for the writers over every round: their backends' CPU is counted until the end.
  const writers = postgres(c.dbUrl, { max: conns, prepare: true, onnotice: () => {}, connection: { application_name: WRITERS } });
  const dbName = new URL(c.dbUrl).pathname.slice(1);
  let delivered = 0;
  let sockets: WebSocket[] = [];
  try {
    await sql.unsafe(TABLE);
    await Promise.all(Array.from({ length: conns }, () => writers`select 1`));
    await insertRate(writers, slice / 2, conns, users); // warm-up
    const ratios: number[] = [];
    const sums = { none: 0, sub: 0 };
    const cpu = { none: { driver: 0, service: 0, postgres: 0, writers: 0, n: 0 }, sub: { driver: 0, service: 0, postgres: 0, writers: 0, n: 0 } };
    for (let r = 0; r < rounds; r++) {
      const round = { none: 0, sub: 0 };
      for (const mode of r % 2 === 0 ? (['none', 'sub'] as const) : (['sub', 'none'] as const)) {
        if (mode === 'sub') sockets = await openClients(c, users, perUser, () => delivered++);
        const d0 = delivered;
        const w0 = await writerCpu(sql, dbName);
        const c0 = cpuNow(dbName, 0);
        const { rate, n } = await insertRate(writers, slice, conns, users);
        // The deliveries of this side are part of its price: counted until the last arrives.
        const end = Date.now() + 20_000;
        while (mode === 'sub' && delivered - d0 < n * perUser && Date.now() < end) await sleep(20);
        const used = cpuSince(c0, cpuNow(dbName, 0));
        const w1 = await writerCpu(sql, dbName);
        for (const [pid, ms] of w1) cpu[mode].writers += ms - (w0.get(pid) ?? ms);
        for (const k of ['driver', 'service', 'postgres'] as const) cpu[mode][k] += used[k];
        cpu[mode].n += n;
        round[mode] = rate;
        sums[mode] += rate;
        if (mode === 'sub') {
          for (const ws of sockets) ws.terminate();
          sockets = [];
          // The groups go with their sockets (a heartbeat or two, the membership at least 10 s
          // old), then the table's subscription and triggers (the bench service's
          // REALTIME_IDLE_MS is 0): the next 'none' side runs on a table nobody watches.
          const end = Date.now() + 30_000;
          while (Date.now() < end && (await sql`select count(*)::int as n from pg_trigger where tgrelid = 'public.bench_rt'::regclass and tgname like '\_900\_live\_%'`)[0].n > 0) await sleep(200);
        }
      }
      ratios.push(round.sub / round.none);
    }
    const ratio = ratios.sort((a, b) => a - b)[Math.floor(ratios.length / 2)];
    const none = sums.none / rounds;
    const sub = sums.sub / rounds;
    const us = (side: 'none' | 'sub', k?: 'driver' | 'service' | 'postgres' | 'writers') =>
      ((k === undefined ? cpu[side].driver + cpu[side].service + cpu[side].postgres : cpu[side][k]) * 1000) / Math.max(1, cpu[side].n);
    const split = (side: 'none' | 'sub') => `${Math.round(us(side, 'driver'))}/${Math.round(us(side, 'service'))}/${Math.round(us(side, 'postgres'))}`;
    // The ceiling that one frame per delivery (perUser per insert) sets on these shared cores.
    const frameUs = await bareFrameCpu(c.quick ? 5000 : 20000);
    const ceiling = us('none') / (us('none') + perUser * frameUs);
    // The same price seen from the database alone (a writer's PostgreSQL on a machine of its
    // own): all its backends' CPU per insert, and its writers' own (their trigger) alone.
    const dbRatio = us('none', 'postgres') / Math.max(1e-9, us('sub', 'postgres'));
    const writerRatio = us('none', 'writers') / Math.max(1e-9, us('sub', 'writers'));
    return {
      status: ratio >= 0.8 ? 'PASS' : 'MISS',
      rps: sub,
      baseline_rps: none,
      ratio,
      baseline: 'same inserts, no table subscription',
      note:
        `8 connections of single-row INSERTs (random owners of ${users}); ${users * perUser} clients subscribed${c.quick ? ' (quick: 200)' : ''} ${Math.round(sub)}/s, ` +
        `none ${Math.round(none)}/s; ${delivered} changes delivered while subscribed; ratio = median of ${rounds} rounds (${ratios.map((x) => x.toFixed(2)).join(' ')}), ${slice} s per side; goal ≥ 0.8` +
        `; CPU µs per insert (driver/service/postgres), its deliveries included: subscribed ${split('sub')}, none ${split('none')}` +
        `; of postgres, the writers' own backends (the statement and its trigger that queues the change): subscribed ${Math.round(us('sub', 'writers'))}, none ${Math.round(us('none', 'writers'))}; ` +
        `the service's backends (polls, RLS checks, notifications): subscribed ${Math.round(us('sub', 'postgres') - us('sub', 'writers'))}` +
        `; a bare WebSocket frame of one change costs ${frameUs.toFixed(1)} µs (send + receive + parse), so ${perUser} deliveries per insert on these cores cap the ratio at ${ceiling.toFixed(2)}` +
        `; PostgreSQL's CPU per insert alone gives ${dbRatio.toFixed(2)} (all its backends), ${writerRatio.toFixed(2)} (the writers' own, their trigger)`,
      extra: { db_ratio: Math.round(dbRatio * 100) / 100, writer_ratio: Math.round(writerRatio * 100) / 100, writers_cpu_us: Math.round(us('sub', 'writers')), writers_none_cpu_us: Math.round(us('none', 'writers')), ceiling: Math.round(ceiling * 100) / 100, bare_frame_us: Math.round(frameUs * 10) / 10, none_cpu_us: Math.round(us('none')), sub_cpu_us: Math.round(us('sub')) },
    };
  } finally {
    for (const ws of sockets) ws.terminate();
    await writers.end({ timeout: 2 });
    await sql.unsafe('drop table if exists public.bench_rt').catch(() => {});
    await sql.end({ timeout: 2 });
  }
}

export const REALTIME_SCENARIOS: CustomScenario[] = [
  { name: 'realtime-changes', what: 'commit → client latency, 1000 Supabase-protocol clients of 100 users, one filtered table subscription each (RLS)', target: { kind: 'none' }, baselineLabel: 'goal p99 ≤ 50 ms', run: realtimeChanges },
  { name: 'realtime-write-cost', what: 'INSERT rate with 1000 table subscriptions of 100 users vs none', target: { kind: 'ratio', min: 0.8 }, baselineLabel: 'no subscription', run: realtimeWriteCost },
];
