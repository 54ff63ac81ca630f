/**
 * Where deliveries may go. A link-local URL (cloud metadata) is refused at registration in
 * every spelling of a literal address; with WEBHOOK_DENY_PRIVATE=true loopback and private
 * literals are too. A name is checked where the connection is made, once resolved: with
 * WEBHOOK_DENY_PRIVATE=true `localhost` (resolved by the system) is refused before any
 * connection and each attempt is recorded as failed with a clear error, while by default it
 * delivers; a resolver the test gives answers link-local addresses for made-up names, and
 * those are refused before connecting too. No packet leaves loopback: every refused target
 * is refused before its socket is opened (the receiver counts connections).
 */
import t from 'tap';
import { createServer } from 'node:http';
import type { LookupAddress } from 'node:dns';
import type { AddressInfo } from 'node:net';
import { startApp } from '../helpers/app.ts';
import { createHook, deliveries, waitFor } from './helpers.ts';
import { post } from '../../src/webhooks/deliver.ts';
import { addressGuard } from '../../src/webhooks/address.ts';

/** A receiver on 127.0.0.1 that counts the connections made to it. */
async function countingReceiver(t: { teardown(fn: () => unknown): void }) {
  const got: string[] = [];
  let connections = 0;
  const server = createServer((req, res) => {
    got.push(req.url ?? '');
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { port: (server.address() as AddressInfo).port, got, connections: () => connections };
}

/**
 * The refused URLs are registered for a table nothing writes: were one accepted (the test
 * run without the check), no delivery could ever go to it.
 */
const UNTOUCHED = 'create table public.untouched (id int primary key)';

const LINK_LOCAL_URLS = [
  'http://169.254.169.254/latest/meta-data/',
  'http://169.254.0.1:8080/hook',
  'http://2852039166/',
  'http://0xA9.0xFE.0xA9.0xFE/',
  'http://[fe80::1]/',
  'http://[FEBF::abcd]:8443/',
  'http://[::ffff:169.254.169.254]/',
  'https://[fd00:ec2::254]/',
];

t.test('by default: a link-local literal is refused at registration; loopback, by address or by name, is allowed and delivers', async (t) => {
  const app = await startApp(t, { env: { WEBHOOK_RETRY_SCHEDULE: '10ms,10ms' } });
  const rx = await countingReceiver(t);
  await app.db.sql.unsafe(UNTOUCHED);
  for (const url of LINK_LOCAL_URLS) {
    const r = await app.call('POST', '/rest/v1/webhooks', { token: app.serviceKey, body: { url, table_name: 'untouched' } });
    t.equal(r.status, 400, url);
    t.same(r.body, { error: 'url must not point at a link-local address' }, `${url}: the reason`);
  }
  t.same((await app.call('GET', '/rest/v1/webhooks', { token: app.serviceKey })).body, [], 'nothing was created');

  await app.db.sql.unsafe(`create table public.orders (id int primary key)`);
  const byName = await createHook(app, { url: `http://localhost:${rx.port}/by-name`, table_name: 'orders' });
  await createHook(app, { url: `http://127.0.0.1:${rx.port}/by-address`, table_name: 'orders' });
  await app.db.sql`insert into public.orders values (1)`;
  await waitFor('both deliveries', () => rx.got.length >= 2);
  t.same([...rx.got].sort(), ['/by-address', '/by-name'], 'loopback receivers are reached');
  const d = await waitFor('the log', async () => (await deliveries(app, byName.id)).find((x) => x.state === 'delivered'));
  t.equal(d.attempts[0].status, 200);
});

t.test('WEBHOOK_DENY_PRIVATE=true: loopback and private refused, literals at registration, names when resolved', async (t) => {
  const app = await startApp(t, { env: { WEBHOOK_DENY_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '10ms,10ms' } });
  const rx = await countingReceiver(t);
  await app.db.sql.unsafe(UNTOUCHED);
  for (const url of [`http://127.0.0.1:${rx.port}/`, `http://[::1]:${rx.port}/`, 'http://10.1.2.3/', 'http://192.168.1.1/', 'http://172.20.0.1/', 'http://0.0.0.0/', 'http://[fd12::1]/', 'http://[::ffff:127.0.0.1]/']) {
    const r = await app.call('POST', '/rest/v1/webhooks', { token: app.serviceKey, body: { url, table_name: 'untouched' } });
    t.same([r.status, r.body], [400, { error: 'url must not point at a loopback or private address' }], url);
  }
  const r = await app.call('POST', '/rest/v1/webhooks', { token: app.serviceKey, body: { url: 'http://169.254.169.254/', table_name: 'untouched' } });
  t.same(r.body, { error: 'url must not point at a link-local address' }, 'link-local still says link-local');

  await app.db.sql.unsafe(`create table public.orders (id int primary key)`);
  const hook = await createHook(app, { url: `http://localhost:${rx.port}/refused`, table_name: 'orders' });
  await app.db.sql`insert into public.orders values (1)`;
  const d = await waitFor('the delivery to fail', async () => (await deliveries(app, hook.id)).find((x) => x.state === 'failed'));
  t.equal(d.attempts.length, 3, 'every attempt made and recorded');
  for (const a of d.attempts) {
    t.equal(a.status, null);
    t.match(a.error, /^refused: localhost resolves to (127\.0\.0\.1|::1), a loopback or private address \(WEBHOOK_DENY_PRIVATE\)$/, 'a clear error');
  }
  t.equal(rx.connections(), 0, 'no connection was made');
  t.equal((await app.call('GET', '/rest/v1/webhooks', { token: app.serviceKey })).status, 200, 'the service goes on');
});

t.test('a name that resolves to a link-local address is refused before connecting', async (t) => {
  const rx = await countingReceiver(t);
  const answers: Record<string, LookupAddress[]> = {
    'metadata.test': [{ address: '169.254.169.254', family: 4 }],
    'metadata6.test': [{ address: 'fe80::a9fe:a9fe', family: 6 }],
    'rebound.test': [{ address: '127.0.0.1', family: 4 }, { address: '169.254.169.254', family: 4 }],
    'receiver.test': [{ address: '127.0.0.1', family: 4 }],
  };
  const resolver = (host: string, _o: unknown, cb: (err: NodeJS.ErrnoException | null, a: LookupAddress[]) => void) => {
    const a = answers[host];
    if (a === undefined) cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' }), []);
    else cb(null, a);
  };
  const never = new AbortController().signal;
  const send = (url: string, denyPrivate = false) => post(url, Buffer.from('{}'), { 'content-type': 'application/json' }, 5000, never, addressGuard(denyPrivate, resolver));
  t.same(await send(`http://metadata.test:${rx.port}/`), { statusCode: null, error: 'refused: metadata.test resolves to 169.254.169.254, a link-local address', interrupted: false });
  t.same(await send(`http://metadata6.test:${rx.port}/`), { statusCode: null, error: 'refused: metadata6.test resolves to fe80::a9fe:a9fe, a link-local address', interrupted: false });
  t.match((await send(`http://rebound.test:${rx.port}/`)).error, /^refused: rebound.test resolves to 169\.254\.169\.254/, 'one refused address among others refuses the name');
  t.equal(rx.connections(), 0, 'none of them connected');
  t.same(await send(`http://receiver.test:${rx.port}/ok`), { statusCode: 200, error: null, interrupted: false }, "the test's resolver is the one used: an allowed answer delivers");
  t.same(rx.got, ['/ok']);
  t.same(await send(`http://127.0.0.1:${rx.port}/literal`, true), { statusCode: null, error: 'refused: 127.0.0.1 is a loopback or private address (WEBHOOK_DENY_PRIVATE)', interrupted: false }, 'a literal address: refused before the request');
  t.same(rx.got, ['/ok'], 'and not sent');
});
