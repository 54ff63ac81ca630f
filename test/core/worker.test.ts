/**
 * The job worker as the service starts it (defaults: 16 concurrent jobs on a pool of 1, its
 * LISTEN on the instance's listener connection):
 * it starts, takes a job, and says nothing at warn or above about its own configuration
 * (graphile-worker's pool-smaller-than-concurrency advice is a choice made here; it goes
 * to debug).
 */
import t from 'tap';
import { pino } from 'pino';
import { ConnectionListener } from '../../src/core/listener.ts';
import { ListenClient, startWorker } from '../../src/worker/index.ts';
import { createTestDatabase } from '../helpers/database.ts';

t.test('the worker starts at its defaults without a warning, and runs a job', async (t) => {
  const db = await createTestDatabase(t);
  const lines: { level: number; msg: string }[] = [];
  const log = pino({ level: 'debug' }, { write: (chunk: string) => lines.push(JSON.parse(chunk)) });
  let done!: (payload: unknown) => void;
  const ran = new Promise((r) => (done = r));
  const listener = new ConnectionListener({ url: db.url, applicationName: 'plinth-listener', log, connectTimeoutMs: 2000 });
  const worker = await startWorker({ databaseUrl: db.url, log, listener, tasks: { plinth_test_echo: async (payload) => done(payload) } });
  t.teardown(async () => {
    await worker.stop();
    await listener.end();
  });
  await db.sql`select graphile_worker.add_job('plinth_test_echo', '{"n": 1}'::json)`;
  const timeout = setTimeout(() => done('timed out'), 20_000);
  t.same(await ran, { n: 1 }, 'the job ran');
  clearTimeout(timeout);
  t.same(lines.filter((l) => l.level >= 40).map((l) => l.msg), [], 'nothing at warn or above');
  t.ok(lines.some((l) => l.level === 20 && /maxPoolSize \(1\) smaller than concurrency \(64\)/.test(l.msg)), 'the pool advice, at debug');
});

t.test("graphile-worker's LISTEN goes through the instance's listener (ListenClient)", async (t) => {
  const db = await createTestDatabase(t);
  const listener = new ConnectionListener({ url: db.url, applicationName: 'plinth-listener', log: pino({ level: 'silent' }), connectTimeoutMs: 2000 });
  t.teardown(() => listener.end());
  const client = new ListenClient(listener);
  const heard: { channel: string; payload: string }[] = [];
  client.on('notification', (m: { channel: string; payload: string }) => heard.push({ channel: m.channel, payload: m.payload }));
  // What graphile-worker sends on the connection it is handed.
  await client.query('LISTEN "jobs:insert"; LISTEN "worker:migrate";');
  const channels = async () =>
    (await listener.query<{ channels: string[] }>('select array(select pg_catalog.pg_listening_channels() order by 1) as channels'))[0].channels;
  t.same(await channels(), ['jobs:insert', 'worker:migrate'], 'both channels listened to on the listener connection');
  await db.sql`select graphile_worker.add_job('plinth_test_echo', '{}'::json)`;
  const until = Date.now() + 20_000;
  while (heard.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
  t.same(
    heard.map((h) => h.channel),
    ['jobs:insert'],
    'add_job notification heard as a client notification',
  );
  await client.query('UNLISTEN "jobs:insert"; UNLISTEN "worker:migrate";');
  t.same(await channels(), [], 'UNLISTEN took them away');
  await t.rejects(client.query('select 1'), /not a LISTEN or UNLISTEN/, 'any other statement is refused');
});
