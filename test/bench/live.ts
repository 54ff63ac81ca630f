/**
 * Live-query scenarios (issue 15). They do not fit the HTTP request/response mould of the
 * other scenarios, so each is a `run` of its own against the bench service (its own
 * process) and the bench database; the WebSocket clients and the writers run in the driver
 * process, on the same cores.
 *
 * - `live-latency`: 1000 subscribers (quick: 200) on 10 fast-path subscriptions; a writer
 *   inserts 50 rows/s (open loop), each carrying the driver's clock; latency = arrival at a
 *   client − the writer's COMMIT acknowledgement (the figure from before the INSERT was
 *   sent, WAL flush included, is in the note). Goal p99 ≤ 20 ms.
 * - `live-write-cost`: single-row INSERTs from 8 connections into a 100,000-row table, with
 *   one subscription whose result is about 100 rows vs none (the same table, alternating
 *   rounds: subscribe, measure, unsubscribe, measure), on the fast path (the delta from the
 *   transition rows). Goal ≥ 0.8.
 * - `live-write-cost-rerun`: the same with a join (re-run off the writer's path). Goal ≥ 0.5.
 * - `live-per-subscriber`: 1000 subscribers of 100 users, one `as: subscriber` subscription
 *   (100 groups); commit → client p50/p99 reported.
 * - `broadcast-fanout`: 1000 clients (quick: 200) on one channel; 8 of them broadcast with
 *   up to 4 messages in flight each; messages delivered per second over all clients.
 */
import postgres from 'postgres';
import WebSocket from 'ws';
import { pacedCalls } from './load.ts';
import type { CustomScenario, RunContext as CustomContext, RunResult as CustomResult } from './scenarios.ts';

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function openClients(c: CustomContext, channel: string, n: number, onMessage: (i: number, data: string) => void): Promise<WebSocket[]> {
  const url = `${c.serviceUrl.replace(/^http/, 'ws')}/ws/${encodeURIComponent(channel)}?apikey=${c.anonKey}`;
  const out: WebSocket[] = [];
  // In batches, so the service's upgrade path is not the thing measured.
  for (let i = 0; i < n; i += 50) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(50, n - i) }, (_, j) => {
        return new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(url, { perMessageDeflate: false });
          ws.once('open', () => resolve(ws));
          ws.once('error', reject);
          ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
          ws.on('message', (data) => onMessage(i + j, (data as Buffer).toString('utf8')));
        });
      }),
    );
    out.push(...batch);
  }
  return out;
}

function closeAll(clients: WebSocket[]): void {
  for (const ws of clients) ws.terminate();
}

async function liveLatency(c: CustomContext): Promise<CustomResult> {
  const clients = c.quick ? 200 : 1000;
  const subs = 10;
  const seconds = c.quick ? 2 : 5;
  const rate = 50; // rows per second in all: 5000 deliveries/s to 1000 clients
  const sql = postgres(c.dbUrl, { max: 2, onnotice: () => {} });
  // Per row (keyed by its `sent` stamp): when its COMMIT was acknowledged to the writer.
  const acked = new Map<number, number>();
  const arrivals: Array<[number, number]> = []; // [sent, arrival]
  const socketsOpen: WebSocket[] = [];
  try {
    await sql.unsafe(`create table if not exists public.bench_live (id bigserial primary key, sub int not null, sent double precision not null, body text)`);
    for (let k = 0; k < subs; k++) {
      await sql`select live.subscribe(${'bench_live_' + k}, ${`select id, sub, sent, body from bench_live where sub = ${k}`})`;
    }
    const [{ fast }] = await sql`select count(*)::int as fast from live_private.subscriptions where query_id like 'bench\\_live\\_%' and fast_table is not null`;
    const per = clients / subs;
    for (let k = 0; k < subs; k++) {
      const ws = await openClients(c, `bench_live_${k}`, per, (_i, data) => {
        const t = now();
        if (!data.startsWith('{"seq"')) return;
        const m = JSON.parse(data) as { inserted?: { sent: number }[] };
        for (const r of m.inserted ?? []) arrivals.push([r.sent, t]);
      });
      socketsOpen.push(...ws);
    }
    await sleep(300);
    const total = rate * seconds;
    await pacedCalls(total, rate, (i, sent) => sql`insert into public.bench_live (sub, sent, body) values (${i % subs}, ${sent}, 'x')`.execute().then(() => acked.set(sent, now())));
    const expected = total * per;
    const end = Date.now() + 5000;
    while (arrivals.length < expected && Date.now() < end) await sleep(20);
    // Commit → client: from the writer's COMMIT acknowledgement (clamped at 0: a client may
    // hear of the commit a moment before the writer does). Send → client includes the
    // INSERT, the trigger and the WAL flush of the commit.
    const fromCommit = arrivals.map(([sent, t]) => Math.max(0, t - (acked.get(sent) ?? t))).sort((a, b) => a - b);
    const fromSend = arrivals.map(([sent, t]) => t - sent).sort((a, b) => a - b);
    const p50 = percentile(fromCommit, 50);
    const p99 = percentile(fromCommit, 99);
    const got = arrivals.length;
    const r1 = (x: number | null) => (x === null ? null : Math.round(x * 10) / 10);
    return {
      status: got < expected ? 'ERROR' : p99 !== null && p99 <= 20 ? 'PASS' : 'MISS',
      rps: got / seconds,
      p50_ms: r1(p50),
      p99_ms: r1(p99),
      baseline: 'goal p99 ≤ 20 ms (Supabase Realtime Postgres Changes: p95 184 ms at 500 clients)',
      note:
        `${clients} clients on ${subs} subscriptions (${fast} on the fast path)${c.quick ? ' (quick: 200 clients)' : ''}, ${rate} rows/s for ${seconds} s; ` +
        `${got}/${expected} deliveries; p50/p99 from the writer's COMMIT acknowledgement to arrival at a client; ` +
        `from before the INSERT is sent: p50 ${r1(percentile(fromSend, 50))} / p99 ${r1(percentile(fromSend, 99))} ms; rps = deliveries/s`,
    };
  } finally {
    closeAll(socketsOpen);
    for (let k = 0; k < subs; k++) await sql`select live.unsubscribe(${'bench_live_' + k})`.catch(() => {});
    await sql.end({ timeout: 2 });
  }
}

async function insertRate(url: string, seconds: number, conns: number): Promise<number> {
  const sql = postgres(url, { max: conns, prepare: true, onnotice: () => {} });
  try {
    await Promise.all(Array.from({ length: conns }, () => sql`select 1`));
    let n = 0;
    const end = now() + seconds * 1000;
    const started = now();
    await Promise.all(
      Array.from({ length: conns }, async () => {
        while (now() < end) {
          await sql`insert into public.bench_wc (k, v) values (${1 + Math.floor(Math.random() * 100_000)}, 'v')`;
          n++;
        }
      }),
    );
    return n / ((now() - started) / 1000);
  } finally {
    await sql.end({ timeout: 2 });
  }
}

/**
 * INSERT rate from 8 connections with one subscription vs none, alternating rounds
 * (subscribe, measure, unsubscribe, measure; the order flips each round). `fast`: a filter
 * over the written table (its delta comes from the transition rows, in the writer's
 * statement). `rerun`: a join, which the writer only marks dirty and the service's poller
 * re-runs off the writer's path.
 */
async function writeCost(c: CustomContext, kind: 'fast' | 'rerun', goal: number): Promise<CustomResult> {
  const rounds = c.quick ? 1 : 5;
  const slice = c.quick ? 1 : 1.5;
  const conns = 8;
  const sql = postgres(c.dbUrl, { max: 1, onnotice: () => {} });
  const query =
    kind === 'fast'
      ? 'select id, k, v from bench_wc where k <= 100'
      : 'select a.id, a.k, b.label from bench_wc a join bench_wc_b b on b.k = a.k where a.k <= 100';
  let runs = { before: 0, after: 0 };
  try {
    await sql.unsafe(`drop table if exists public.bench_wc, public.bench_wc_b;
      create table public.bench_wc (id bigserial primary key, k int not null, v text not null);
      insert into public.bench_wc (k, v) select g, 'v' from generate_series(1, 100000) g;
      create index on public.bench_wc (k);
      create table public.bench_wc_b (k int primary key, label text not null);
      insert into public.bench_wc_b select g, 'label ' || g from generate_series(1, 1000) g;
      analyze public.bench_wc; analyze public.bench_wc_b;`);
    await insertRate(c.dbUrl, slice / 2, conns); // warm-up
    const sums = { none: 0, sub: 0 };
    const ratios: number[] = [];
    let result = 0;
    for (let r = 0; r < rounds; r++) {
      const round = { none: 0, sub: 0 };
      for (const mode of r % 2 === 0 ? (['none', 'sub'] as const) : (['sub', 'none'] as const)) {
        if (mode === 'sub') {
          await sql`select live.subscribe('bench_wc', ${query})`;
          const [s] = await sql`select fast_table is not null as fast, jsonb_array_length(snapshot) as rows from live_private.subscriptions where query_id = 'bench_wc'`;
          if (s.fast !== (kind === 'fast')) throw new Error(`expected the ${kind} path`);
          result = s.rows;
        }
        const rate = await insertRate(c.dbUrl, slice, conns);
        round[mode] = rate;
        sums[mode] += rate;
        if (mode === 'sub') {
          const [{ seq }] = await sql`select seq::int from live_private.subscriptions where query_id = 'bench_wc'`;
          runs = { before: runs.before, after: runs.after + seq };
          await sql`select live.unsubscribe('bench_wc')`;
        }
      }
      ratios.push(round.sub / round.none);
    }
    const none = sums.none / rounds;
    const sub = sums.sub / rounds;
    // The median of the rounds' ratios (each round measures both sides back to back), which
    // a burst of background load in one slice moves least.
    const ratio = ratios.sort((a, b) => a - b)[Math.floor(ratios.length / 2)];
    const how = kind === 'fast' ? 'fast path (delta from transition rows)' : 're-run path (a join, re-run off the writer\'s path)';
    return {
      status: ratio >= goal ? 'PASS' : 'MISS',
      rps: sub,
      baseline_rps: none,
      ratio,
      baseline: 'same inserts, no subscription',
      note:
        `8 connections of single-row INSERTs into 100,000 rows; subscription result ${result} rows; ${how} ${Math.round(sub)}/s, none ${Math.round(none)}/s; ` +
        `${runs.after} messages published while subscribed; ratio = median of ${rounds} rounds (${ratios.map((x) => x.toFixed(2)).join(' ')}), ${slice} s per side; goal ≥ ${goal}`,
    };
  } finally {
    await sql`select live.unsubscribe('bench_wc')`.catch(() => {});
    await sql.unsafe('drop table if exists public.bench_wc, public.bench_wc_b').catch(() => {});
    await sql.end({ timeout: 2 });
  }
}

/**
 * `live-per-subscriber`: 1000 subscribers (quick: 200) of 100 users (quick: 20) on one
 * `as: subscriber` subscription over an owner-only table (RLS), so 100 groups; a writer
 * inserts rows for random users at 20 rows/s (open loop), each carrying the driver's clock;
 * latency = arrival at a client of the row's owner − the writer's COMMIT acknowledgement.
 * The query is a filter over one table: each group's delta is computed from the changed
 * rows under its role and claims (the fast path per group), off the writer's path.
 */
async function livePerSubscriber(c: CustomContext): Promise<CustomResult> {
  const users = c.quick ? 20 : 100;
  const clients = users * 10;
  const seconds = c.quick ? 2 : 5;
  const rate = 20;
  const sql = postgres(c.dbUrl, { max: 2, onnotice: () => {} });
  const acked = new Map<number, number>();
  const arrivals: Array<[number, number]> = [];
  const sockets: WebSocket[] = [];
  const uid = (u: number) => `00000000-0000-4000-8000-${String(u).padStart(12, '0')}`;
  try {
    await sql.unsafe(`drop table if exists public.bench_ps;
      create table public.bench_ps (id bigserial primary key, owner uuid not null, sent double precision not null);
      alter table public.bench_ps enable row level security;
      create policy own on public.bench_ps for select to authenticated using (owner = auth.uid());
      grant select on public.bench_ps to authenticated;`);
    await sql`select live.subscribe('bench_ps', 'select id, sent from bench_ps', 'delta', null, '{"as": "subscriber"}'::jsonb)`;
    const base = `${c.serviceUrl.replace(/^http/, 'ws')}/ws/bench_ps`;
    for (let u = 0; u < users; u++) {
      const token = await c.userToken(uid(u));
      const batch = await Promise.all(
        Array.from({ length: 10 }, () => {
          return new Promise<WebSocket>((resolve, reject) => {
            const ws = new WebSocket(`${base}?token=${token}`, { perMessageDeflate: false });
            ws.once('open', () => resolve(ws));
            ws.once('error', reject);
            ws.once('unexpected-response', (_req, res) => {
              let body = '';
              res.on('data', (d: Buffer) => (body += d));
              res.on('end', () => reject(new Error(`upgrade refused: ${res.statusCode} ${body}`)));
            });
            ws.on('message', (data) => {
              const t = now();
              const text = (data as Buffer).toString();
              if (!text.startsWith('{"seq"') && !text.startsWith('{"query_id"')) return;
              const m = JSON.parse(text) as { inserted?: { sent: number }[] };
              for (const r of m.inserted ?? []) arrivals.push([r.sent, t]);
            });
          });
        }),
      );
      sockets.push(...batch);
    }
    const [{ groups }] = await sql`select count(*)::int as groups from live_private.groups where query_id = 'bench_ps'`;
    await sleep(300);
    const total = rate * seconds;
    await pacedCalls(total, rate, (i, sent) => sql`insert into public.bench_ps (owner, sent) values (${uid(i % users)}, ${sent})`.execute().then(() => acked.set(sent, now())));
    const expected = total * 10;
    const end = Date.now() + 10_000;
    while (arrivals.length < expected && Date.now() < end) await sleep(20);
    const fromCommit = arrivals.map(([sent, t]) => Math.max(0, t - (acked.get(sent) ?? t))).sort((a, b) => a - b);
    const r1 = (x: number | null) => (x === null ? null : Math.round(x * 10) / 10);
    const got = arrivals.length;
    return {
      status: got < expected ? 'ERROR' : 'INFO',
      rps: got / seconds,
      p50_ms: r1(percentile(fromCommit, 50)),
      p99_ms: r1(percentile(fromCommit, 99)),
      baseline: 'none (commit → client of the row owner, per-subscriber results)',
      note:
        `${clients} clients of ${users} users in ${groups} groups on one as-subscriber subscription (RLS owner-only)${c.quick ? ' (quick)' : ''}, ` +
        `${rate} rows/s for ${seconds} s; ${got}/${expected} deliveries; p50/p99 from the writer's COMMIT acknowledgement; rps = deliveries/s`,
    };
  } finally {
    closeAll(sockets);
    await sql`select live.unsubscribe('bench_ps')`.catch(() => {});
    await sql.unsafe('drop table if exists public.bench_ps').catch(() => {});
    await sql.end({ timeout: 2 });
  }
}

async function broadcastFanout(c: CustomContext): Promise<CustomResult> {
  const n = c.quick ? 200 : 1000;
  const seconds = c.quick ? 2 : 5;
  const senders = 8;
  const window = 4; // per sender (a client's broadcasts go out one database round trip at a time, in order)
  const sql = postgres(c.dbUrl, { max: 1, onnotice: () => {} });
  let clients: WebSocket[] = [];
  try {
    await sql.unsafe(`create table if not exists public.bench_bc (id int); select live.subscribe('bench_fanout', 'select id from bench_bc');`);
    let delivered = 0;
    let counting = false;
    let received = 0; // every broadcast received, in the window and after it
    const echoed = new Array<number>(senders).fill(0);
    const sent = new Array<number>(senders).fill(0);
    let ids: string[] = [];
    clients = await openClients(c, 'bench_fanout', n, (i, data) => {
      if (i < senders && data.includes('"subscribed"')) ids[i] = (JSON.parse(data) as { client_id: string }).client_id;
      if (!data.includes('"broadcast"')) return;
      received++;
      if (counting) delivered++;
      if (i < senders) {
        const from = (JSON.parse(data) as { from: string }).from;
        if (from === ids[i]) echoed[i]++;
      }
    });
    await sleep(300);
    received = 0;
    const pump = () => {
      for (let s = 0; s < senders; s++) {
        while (sent[s] - echoed[s] < window) {
          clients[s].send(JSON.stringify({ type: 'broadcast', payload: { i: sent[s], text: 'hello everyone' } }));
          sent[s]++;
        }
      }
    };
    counting = true;
    const started = now();
    const end = started + seconds * 1000;
    while (now() < end) {
      pump();
      await sleep(1);
    }
    const elapsed = (now() - started) / 1000;
    counting = false;
    const total = sent.reduce((a, b) => a + b, 0);
    // Every broadcast sent must reach every client: wait for the tail, then compare.
    const expected = total * n;
    const deadline = now() + 30_000;
    while (received < expected && now() < deadline) await sleep(20);
    ids = [];
    return {
      status: delivered > 0 && received === expected ? 'INFO' : 'ERROR',
      rps: delivered / elapsed,
      baseline: 'none (messages delivered per second over all clients)',
      note: `${n} clients on one channel${c.quick ? ' (quick: 200)' : ''}, ${senders} of them sending with ${window} in flight each; ${Math.round(total / elapsed)} broadcasts/s, each to every client; ${received} of ${expected} messages delivered in all`,
    };
  } finally {
    closeAll(clients);
    await sql`select live.unsubscribe('bench_fanout')`.catch(() => {});
    await sql.end({ timeout: 2 });
  }
}


export const LIVE_SCENARIOS: CustomScenario[] = [
  { name: 'live-latency', what: 'commit → WebSocket client latency, 1000 subscribers on 10 subscriptions', target: { kind: 'none' }, baselineLabel: 'goal p99 ≤ 20 ms', run: liveLatency },
  { name: 'live-per-subscriber', what: 'commit → client latency, 1000 subscribers of 100 users on one as-subscriber subscription', target: { kind: 'none' }, baselineLabel: 'none', run: livePerSubscriber },
  { name: 'live-write-cost', what: 'INSERT rate with one ~100-row fast-path subscription vs none (100,000-row table)', target: { kind: 'ratio', min: 0.8 }, baselineLabel: 'no subscription', run: (c) => writeCost(c, 'fast', 0.8) },
  { name: 'live-write-cost-rerun', what: 'INSERT rate with one ~100-row join subscription (re-run off the writer\'s path) vs none, 8 writers', target: { kind: 'ratio', min: 0.5 }, baselineLabel: 'no subscription', run: (c) => writeCost(c, 'rerun', 0.5) },
  { name: 'broadcast-fanout', what: 'broadcast messages delivered per second to 1000 clients of one channel', target: { kind: 'none' }, baselineLabel: 'none', run: broadcastFanout },
];
