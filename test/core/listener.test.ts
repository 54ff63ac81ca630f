/**
 * The listener's one connection takes one statement at a time (src/core/listener.ts): a
 * LISTEN or UNLISTEN asked while a background statement runs waits for it. node-postgres
 * would queue the overlapping statement itself, but it deprecates doing so, with a warning
 * in the service's log at every start.
 */
import t from 'tap';
import { pino } from 'pino';
import { ConnectionListener } from '../../src/core/listener.ts';
import { createTestDatabase } from '../helpers/database.ts';

t.test('LISTEN and UNLISTEN during a background statement: in turn, heard, no warning', async (t) => {
  const db = await createTestDatabase(t);
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  const listener = new ConnectionListener({ url: db.url, applicationName: 'plinth-listener', log: pino({ level: 'silent' }), connectTimeoutMs: 2000 });
  t.teardown(async () => {
    process.off('warning', onWarning);
    await listener.end();
  });
  await listener.listen('plinth_first', () => {});

  // Areas starting together ask for their channels at once, while a statement may be running.
  const slow = listener.query<{ n: number }>('select 1 as n from pg_catalog.pg_sleep(0.3)');
  let heard!: (payload: string) => void;
  const payload = new Promise<string>((r) => (heard = r));
  const [second] = await Promise.all([
    listener.listen('plinth_second', (p) => heard(p)),
    listener.listen('plinth_third', () => {}),
    listener.listen('plinth_fourth', () => {}),
  ]);
  t.same(await slow, [{ n: 1 }], 'the background statement ran');
  await db.sql`select pg_catalog.pg_notify('plinth_second', 'hello')`;
  t.equal(await payload, 'hello', 'a channel listened to during a statement is heard');

  const slow2 = listener.query('select pg_catalog.pg_sleep(0.3)');
  await second.unlisten();
  await slow2;
  const [{ channels }] = await listener.query<{ channels: string[] }>('select array(select pg_catalog.pg_listening_channels() order by 1) as channels');
  t.same(channels, ['plinth_first', 'plinth_fourth', 'plinth_third'], 'UNLISTEN during a statement took effect');
  t.same(warnings.filter((w) => /already executing a query/.test(w)), [], 'node-postgres saw no overlapping statement');
});
