/**
 * Function budgets in the bundled runtime (one process per function, FUNCTIONS_MEMORY_MB,
 * FUNCTIONS_TIMEOUT_MS as the CPU budget): an endless loop and a memory bomb beside a
 * healthy function, which keeps answering 200 all along; both processes are ended and
 * replaced. And an edge function as the target of a queue: it receives the payload and the
 * headers that say which run called it.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { bundledRuntime } from '../../src/functions/index.ts';
import { waitFor } from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'plinth-budgets-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const fn = (name: string, source: string) => {
  mkdirSync(join(dir, name), { recursive: true });
  writeFileSync(join(dir, name, 'index.ts'), source);
};
fn('healthy', `export default () => Response.json({ ok: true });`);
fn('spin', `export default (req: Request) => { if (new URL(req.url).searchParams.has('loop')) for (;;) {} return Response.json({ spin: 'idle' }); };`);
fn('bomb', `const keep: unknown[] = [];
export default (req: Request) => {
  if (new URL(req.url).searchParams.has('go')) for (;;) keep.push(new Array(1 << 16).fill(Math.random()));
  return Response.json({ bomb: 'idle' });
};`);
fn('job_echo', `export default async (req: Request) => {
  const body = await req.json();
  const h = (k: string) => req.headers.get(k);
  const want = { kind: 'queue', name: 'fnq', attempt: '1' };
  const got = { kind: h('x-job-kind'), name: h('x-job-name'), attempt: h('x-job-attempt') };
  if (body.x !== 42 || JSON.stringify(got) !== JSON.stringify(want) || !h('x-job-id') || !h('x-request-id') || !h('authorization')) {
    return Response.json({ body, got }, { status: 500 });
  }
  return Response.json({ ok: true });
};`);

fn('whoami', `export default (req: Request) => Response.json({
  url: Deno.env.get('PLINTH_URL'), supabaseUrl: Deno.env.get('SUPABASE_URL'), anon: Deno.env.get('PLINTH_ANON_KEY'),
  claims: JSON.parse(req.headers.get('x-caller-claims') ?? 'null'),
});`);

const logs: string[] = [];
const log = pino({ level: 'info', base: undefined }, { write: (s: string) => void logs.push(s) });
const db = await createTestDatabase(t);
await db.sql`insert into edge.functions (name, runtime, verify_jwt) values ('healthy', 'deno', false), ('spin', 'deno', false), ('bomb', 'deno', false), ('job_echo', 'deno', true), ('whoami', 'deno', false)`;
const app = await startApp(t, { db, log, env: { FUNCTIONS_DIR: dir, FUNCTIONS_TIMEOUT_MS: '1500', FUNCTIONS_MEMORY_MB: '64' } });
const pool = bundledRuntime(app.service.app)!;

t.test('an endless loop and a memory bomb beside a healthy function', async (t) => {
  for (const name of ['healthy', 'spin', 'bomb']) t.equal((await app.call('GET', `/functions/v1/${name}`)).status, 200, `${name} is up`);
  const spinPid = pool.member('spin').pid;
  const bombPid = pool.member('bomb').pid;
  const spin = app.call('GET', '/functions/v1/spin?loop');
  const bomb = app.call('GET', '/functions/v1/bomb?go');
  let done = false;
  const incident = Promise.all([spin, bomb]).finally(() => (done = true));
  const healthy: number[] = [];
  while (!done || healthy.length < 5) healthy.push((await app.call('GET', '/functions/v1/healthy')).status);
  const [s, b] = await incident;
  t.ok([502, 504].includes(s.status), `the endless loop's call ends (${s.status})`);
  t.ok([502, 504].includes(b.status), `the memory bomb's call ends (${b.status})`);
  t.same([...new Set(healthy)], [200], `the healthy function answered 200 all along (${healthy.length} calls)`);
  t.ok(await waitFor(() => pool.member('spin').pid !== spinPid && pool.member('bomb').pid !== bombPid, 20_000, 50), 'both processes were ended');
  t.ok(logs.some((l) => l.includes('over its budget') && l.includes('"budget":"cpu"') && l.includes('"function":"spin"')), 'the CPU budget is logged');
  // Near its heap cap V8 collects again and again, holding the event loop: whichever budget
  // ends the process first (the heap cap, or the CPU budget during that thrashing) contains it.
  t.ok(logs.some((l) => l.includes('"function":"bomb"') && /"budget":"(memory|cpu)"/.test(l)), 'the bomb is ended by a budget');
  t.ok(await waitFor(async () => (await app.call('GET', '/functions/v1/spin')).status === 200, 20_000, 50), 'spin answers again from a new process');
  t.ok(await waitFor(async () => (await app.call('GET', '/functions/v1/bomb')).status === 200, 20_000, 50), 'bomb answers again from a new process');
  t.equal(pool.member('healthy').starts, 1, 'the healthy function kept its process');
  // How long a replacement took here (reported, not asserted: the machine is shared).
  for (const name of ['spin', 'bomb']) {
    const lines = logs.map((l) => JSON.parse(l) as { time: number; msg: string; function?: string }).filter((l) => l.function === name);
    const exited = lines.find((l) => l.msg === 'edge runtime exited; restarting');
    const back = exited && lines.find((l) => l.msg === 'edge runtime listening' && l.time >= exited.time);
    if (exited && back) t.comment(`${name}: a new process listened ${back.time - exited.time} ms after the old one ended`);
  }
});

t.test('an edge function as a queue target: the payload and the run headers', async (t) => {
  await db.sql`select plinth.queue('fnq', 'function:job_echo', '{"max_attempts": 1}')`;
  await db.sql`select plinth.enqueue('fnq', '{"x": 42}'), plinth.enqueue('fnq', '{"x": 41}')`;
  const runs = async () => (await app.call('GET', '/api/runs?name=fnq', { token: app.serviceKey })).body as Array<Record<string, any>>;
  t.ok(await waitFor(async () => (await runs()).filter((r) => r.outcome !== 'running').length === 2, 30_000, 100), 'both ran');
  const [second, first] = await runs();
  t.equal(first.outcome, 'succeeded', 'the function got its payload and the headers');
  t.equal(second.outcome, 'failed', 'a payload it refuses fails the run');
  t.match(second.error, /HTTP 500: .*"x":41/, 'with the answer in the error');
  t.match(first.request_id, /^[0-9a-f-]{36}$/);
});

t.test('a function learns its caller and how to reach plinth', async (t) => {
  const r = await app.call('GET', '/functions/v1/whoami', { token: app.serviceKey, headers: { 'x-caller-claims': '{"role":"forged"}' } });
  t.equal(r.status, 200);
  t.equal(r.body.url, app.url, 'PLINTH_URL: the service');
  t.equal(r.body.supabaseUrl, app.url, 'and under Supabase\'s name');
  t.equal(r.body.anon, app.anonKey, 'PLINTH_ANON_KEY');
  t.equal(r.body.claims.role, 'service_role', 'the verified claims, not the forged header');
  const anon = await app.call('GET', '/functions/v1/whoami', { headers: { authorization: 'Bearer not-a-token' } });
  t.equal(anon.body.claims.role, 'anon', 'no valid credential (verify_jwt off): the anon claims');
});
