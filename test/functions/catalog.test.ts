/**
 * The catalog cache on two instances (contract §6, design.md "Several instances"): a change
 * to edge.functions reaches both through the trigger's NOTIFY; with the trigger off, one
 * POST /functions/v1/_refresh reloads both.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { loopbackRuntime, waitFor } from './helpers.ts';

const runtime = await loopbackRuntime({
  greet: (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"hello":"there"}'),
});
t.teardown(() => runtime.close());

const db = await createTestDatabase(t);
const env = { EDGE_RUNTIME_URL: runtime.url };
const a = await startApp(t, { db, env });
const b = await startApp(t, { db, env });
const status = async (app: typeof a) => (await app.call('POST', '/functions/v1/greet', { apikey: app.anonKey, body: {} })).status;
const both = (want: number) => waitFor(async () => (await status(a)) === want && (await status(b)) === want);

t.test('an insert, an update and a delete reach both instances', async (t) => {
  t.equal(await status(a), 404, 'not in the catalog yet');
  await db.sql`insert into edge.functions (name, runtime) values ('greet', 'deno')`;
  t.ok(await both(200), 'insert: callable on both');
  await db.sql`update edge.functions set status = 'paused' where name = 'greet'`;
  t.ok(await both(404), 'status other than active: 404 on both');
  await db.sql`update edge.functions set status = 'active' where name = 'greet'`;
  t.ok(await both(200), 'active again');
  await db.sql`delete from edge.functions where name = 'greet'`;
  t.ok(await both(404), 'delete: gone on both');
});

t.test('with the trigger off, POST /functions/v1/_refresh on one instance reloads both', async (t) => {
  await db.sql`alter table edge.functions disable trigger _100_notify`;
  t.teardown(() => db.sql`alter table edge.functions enable trigger _100_notify`);
  await db.sql`insert into edge.functions (name, runtime) values ('greet', 'deno')`;
  t.equal(await status(a), 404, 'A still has the old catalog');
  t.equal(await status(b), 404, 'so has B');
  const r = await a.call('POST', '/functions/v1/_refresh', { token: a.serviceKey });
  t.same(r.body, { ok: true });
  t.equal(await status(a), 200, 'A reloaded before answering');
  t.ok(await waitFor(async () => (await status(b)) === 200), 'B reloaded on the NOTIFY');
});
