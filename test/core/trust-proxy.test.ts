/**
 * TRUST_PROXY in its forms (false, true, a number of proxies, proxy addresses and CIDR
 * ranges): what the configuration accepts and refuses, and that every reader of the client
 * address — the auth rate limits (test/auth/rate-limit.test.ts), the WebSocket per-IP cap and
 * the function forwarder's X-Forwarded-For — uses the one address fastify resolves.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import { parseConfig } from '../../src/core/config.ts';
import { fastifyTrustProxy } from '../../src/core/http.ts';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { sendFrom, startForwardingProxy } from '../helpers/forwarding-proxy.ts';
import { loopbackRuntime } from '../functions/helpers.ts';
import { open, refused } from '../live/helpers.ts';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

t.test('the forms TRUST_PROXY takes', async (t) => {
  const parsed = (v: string | undefined) => parseConfig(v === undefined ? {} : { TRUST_PROXY: v }).trustProxy;
  t.equal(parsed(undefined), false, 'unset: false');
  t.equal(parsed('false'), false);
  t.equal(parsed('true'), true);
  t.equal(parsed('0'), false, '0 proxies: false');
  t.equal(parsed('1'), 1);
  t.equal(parsed('3'), 3);
  t.same(parsed('127.0.0.1'), ['127.0.0.1']);
  t.same(parsed(' 127.0.0.1 , 10.0.0.0/8,,192.168.1.0/24 '), ['127.0.0.1', '10.0.0.0/8', '192.168.1.0/24']);
  t.same(parsed('::1,fd00::/8,loopback,linklocal,uniquelocal'), ['::1', 'fd00::/8', 'loopback', 'linklocal', 'uniquelocal']);

  const bad = ['yes', 'TRUE', '-1', '1.5', '101', 'proxy.internal', '10.0.0.0/33', '10.0.0.0/0', '10.0.0.0/8x', '::1/129', '127.0.0.1,bogus', 'fe80::1%eth0', ',', '010.0.0.1'];
  for (const v of bad) t.throws(() => parseConfig({ TRUST_PROXY: v }), { message: /^invalid configuration: TRUST_PROXY / }, `${JSON.stringify(v)} is refused`);

  // Every list the configuration accepts, fastify (proxy-addr) compiles too.
  for (const v of ['true', '2', '127.0.0.1', '10.0.0.0/8, ::1, fd00::/8', 'loopback,linklocal,uniquelocal', '::ffff:10.0.0.1']) {
    t.doesNotThrow(() => Fastify({ trustProxy: fastifyTrustProxy(parseConfig({ TRUST_PROXY: v }).trustProxy) }), `fastify takes ${v}`);
  }
});

t.test('a bad TRUST_PROXY stops the start: one line on stderr naming it, exit 1', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-trust-proxy-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const r = await new Promise<{ code: number | null; stderr: string; stdout: string }>((resolve) => {
    const child = spawn(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', DATA_DIR: dir, PORT: '0', TRUST_PROXY: '10.0.0.0/40' } });
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.on('data', (d) => (stdout += d));
    child.on('close', (code) => resolve({ code, stderr, stdout }));
  });
  t.equal(r.code, 1);
  const lines = r.stderr.trim().split('\n');
  t.equal(lines.length, 1, 'one line');
  t.match(lines[0], /^invalid configuration: TRUST_PROXY has an invalid proxy address "10\.0\.0\.0\/40"/);
  t.equal(r.stdout, '', 'nothing started');
});

async function liveFixture(app: TestApp): Promise<void> {
  await app.db.sql.unsafe(`create table public.notes (id int primary key, body text);
    select live.subscribe('notes', 'select id, body from notes');`);
}

t.test('WebSocket per-IP cap: keyed on the resolved client, not on what the client wrote', async (t) => {
  // TRUST_PROXY=1: the socket (this test, on loopback) is the proxy; the right-most entry is the client.
  const app = await startApp(t, { env: { WS_MAX_CONNECTIONS_PER_IP: '1', TRUST_PROXY: '1' } });
  await liveFixture(app);
  const from = (xff: string) => ({ query: { apikey: app.anonKey }, headers: { 'x-forwarded-for': xff } });
  const a = await open(app, '/ws/notes', from('203.0.113.1, 198.51.100.7'));
  t.same(
    await refused(app, '/ws/notes', from('203.0.113.2, 198.51.100.7')),
    { status: 429, body: { error: 'too many connections from this address' } },
    'another forged left-most entry, the same client: 429',
  );
  const b = await open(app, '/ws/notes', from('203.0.113.1, 198.51.100.8'));
  t.ok(b, 'another client has its own place');
  a.ws.terminate();
  b.ws.terminate();

  // A list of proxies: the socket 127.0.0.1 is one, 10.0.0.0/8 are too; the client is the hop before them.
  const listed = await startApp(t, { db: app.db, env: { WS_MAX_CONNECTIONS_PER_IP: '1', TRUST_PROXY: '127.0.0.1,10.0.0.0/8' } });
  const viaList = (xff: string) => ({ query: { apikey: listed.anonKey }, headers: { 'x-forwarded-for': xff } });
  const c = await open(listed, '/ws/notes', viaList('203.0.113.1, 198.51.100.9, 10.1.2.3'));
  t.same(
    (await refused(listed, '/ws/notes', viaList('203.0.113.5, 198.51.100.9, 10.9.9.9'))).status,
    429,
    'the same client behind another trusted proxy: 429',
  );
  c.ws.terminate();
});

t.test("the function forwarder's X-Forwarded-For starts with the resolved client", async (t) => {
  const runtime = await loopbackRuntime({ echo: (_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok') });
  t.teardown(() => runtime.close());
  const db = await createTestDatabase(t);
  await db.sql`insert into edge.functions (name, runtime, status, verify_jwt) values ('echo', 'deno', 'active', false)`;
  const start = (trustProxy?: string) => startApp(t, { db, env: { EDGE_RUNTIME_URL: runtime.url, ...(trustProxy ? { TRUST_PROXY: trustProxy } : {}) } });
  const seenFor = async (app: TestApp, local: string, base: string, xff?: string) => {
    const r = await sendFrom(local, base, 'GET', '/functions/v1/echo', undefined, { apikey: app.anonKey, ...(xff ? { 'x-forwarded-for': xff } : {}) });
    t.equal(r.status, 200);
    return runtime.seen.at(-1)!.headers['x-forwarded-for'];
  };

  const plain = await start();
  t.equal(await seenFor(plain, '127.0.0.2', plain.url), '127.0.0.2', 'no proxy trusted: the socket');
  t.equal(await seenFor(plain, '127.0.0.2', plain.url, '203.0.113.66'), '127.0.0.2', "a client's own header is not passed on as its address");

  const one = await start('1');
  const proxy = await startForwardingProxy(t, one.url);
  t.equal(await seenFor(one, '127.0.0.3', proxy.url, '203.0.113.66'), '127.0.0.3, 127.0.0.1', 'behind one proxy: the client the proxy saw, then the proxy');

  const legacy = await start('true');
  t.equal(await seenFor(legacy, '127.0.0.2', legacy.url, '203.0.113.66, 10.0.0.1'), '203.0.113.66, 10.0.0.1, 127.0.0.2', 'true: the whole chain, as before');
});
