/**
 * Forwarding to a Deno edge runtime (interface §4.7, contract §6): a real loopback runtime
 * (node:http) behind EDGE_RUNTIME_URL. Method, path suffix, query, body and headers go
 * there; status, headers and body come back; both bodies stream; verify_jwt both ways;
 * 404 for unknown and inactive names; 502 when the runtime is down, 503 when none is
 * configured, 504 on a hang.
 */
import t from 'tap';
import http from 'node:http';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { userToken } from '../rest/helpers.ts';
import { closedPort, loopbackRuntime, rawGet } from './helpers.ts';

const runtime = await loopbackRuntime(
  {
    echo: (req, res, body) => {
      res.writeHead(201, {
        'content-type': 'text/plain; charset=utf-8',
        'cache-control': 'max-age=5',
        'x-fn': 'yes',
        'set-cookie': ['a=1', 'b=2'],
        'access-control-allow-origin': '*',
      });
      res.end(`${req.method} ${req.url} ${body}`);
    },
    teapot: (_req, res) => res.writeHead(418, { 'content-type': 'application/json' }).end('{"short":"and stout"}'),
    fail: (_req, res) => res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"the function said no"}'),
    open: (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"open":true}'),
  },
  {
    // Answers each request chunk as it arrives, upper-cased, before the request has ended.
    stream: (req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.flushHeaders();
      req.on('data', (c: Buffer) => res.write(c.toString('utf8').toUpperCase()));
      req.on('end', () => res.end('|end'));
    },
    // Never answers.
    hang: () => {},
    // Answers, sends a little, then stalls.
    stall: (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('partial');
    },
  },
);
t.teardown(() => runtime.close());

const db = await createTestDatabase(t);
await db.sql`
  insert into edge.functions (name, runtime, status, verify_jwt) values
    ('echo', 'deno', 'active', true),
    ('teapot', 'deno', 'active', true),
    ('fail', 'deno', 'active', true),
    ('stream', 'deno', 'active', true),
    ('hang', 'deno', 'active', false),
    ('stall', 'deno', 'active', false),
    ('open', 'deno', 'active', false),
    ('retired', 'deno', 'disabled', false),
    ('ghost', 'deno', 'active', true)`;
const RUNTIME_SECRET = 'an-external-runtime-secret-0123456789';
const app: TestApp = await startApp(t, { db, env: { EDGE_RUNTIME_URL: runtime.url, FUNCTIONS_TIMEOUT_MS: '400', EDGE_RUNTIME_SECRET: RUNTIME_SECRET } });
const anon = { apikey: app.config.anonKey };

t.test('method, path suffix, query, body and headers reach the runtime; status, headers and body come back', async (t) => {
  const before = runtime.seen.length;
  const token = await userToken('00000000-0000-4000-8000-00000000000a');
  const res = await app.fetch('/functions/v1/echo/a/b%20c?x=1&y=two', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, apikey: app.anonKey, origin: 'http://localhost:3000' },
    body: '{"hello":"world"}',
  });
  t.equal(res.status, 201, "the runtime's status");
  t.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8', 'Content-Type unchanged');
  t.equal(res.headers.get('cache-control'), 'max-age=5', 'Cache-Control unchanged');
  t.equal(res.headers.get('x-fn'), 'yes', "the function's own headers");
  t.same(res.headers.getSetCookie(), ['a=1', 'b=2'], 'repeated headers stay apart');
  t.equal(res.headers.get('access-control-allow-origin'), 'http://localhost:3000', "CORS is the service's, not the function's");
  t.equal(await res.text(), 'POST /echo/a/b%20c?x=1&y=two {"hello":"world"}', 'body unchanged');
  t.equal(runtime.seen.length, before + 1);
  const seen = runtime.seen.at(-1)!;
  t.equal(seen.headers['content-type'], 'application/json', 'Content-Type forwarded');
  t.equal(seen.headers.authorization, `Bearer ${token}`, 'Authorization forwarded');
  t.equal(seen.headers.apikey, app.anonKey, 'apikey forwarded');
  t.equal(seen.headers['x-forwarded-for'], '127.0.0.1');
  t.equal(seen.headers['content-length'], '17', 'a sized body stays sized');
  t.equal(seen.headers['transfer-encoding'], undefined, 'not re-chunked');

  const get = await app.call('GET', '/functions/v1/echo?only=query', { apikey: app.anonKey });
  t.equal(get.status, 201);
  t.equal(get.text, 'GET /echo?only=query ', 'GET without a body');
  const put = await app.call('PUT', '/functions/v1/echo', { apikey: app.anonKey, raw: 'plain text', headers: { 'content-type': 'text/plain' } });
  t.equal(put.text, 'PUT /echo plain text', 'any method, any content type');
  t.equal(runtime.seen.at(-1)!.headers['content-type'], 'text/plain');
});

t.test("the runtime's status passes through, errors included", async (t) => {
  const tea = await app.call('POST', '/functions/v1/teapot', { ...anon, body: {} });
  t.equal(tea.status, 418);
  t.same(tea.body, { short: 'and stout' });
  const fail = await app.call('GET', '/functions/v1/fail', anon);
  t.equal(fail.status, 500);
  t.same(fail.body, { error: 'the function said no' }, "a function's own 500 body is its own");
});

t.test('both bodies stream: the answer to the first chunk arrives before the request ends', async (t) => {
  const u = new URL(app.url + '/functions/v1/stream');
  const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { apikey: app.anonKey, 'content-type': 'text/plain' } });
  const received: string[] = [];
  let onData: (() => void) | null = null;
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    req.on('response', resolve);
    req.on('error', reject);
    req.write('first;');
  });
  t.equal(res.statusCode, 200);
  res.setEncoding('utf8');
  res.on('data', (d: string) => {
    received.push(d);
    onData?.();
  });
  const until = (s: string) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no "${s}" within 5 s; got ${received.join('')}`)), 5000);
      const check = () => {
        if (received.join('').includes(s)) {
          clearTimeout(timer);
          onData = null;
          resolve();
        }
      };
      onData = check;
      check();
    });
  await until('FIRST;');
  t.pass('the first chunk came back while the request was still open');
  req.write('second');
  await until('SECOND');
  t.pass('and the second');
  req.end();
  await new Promise<void>((resolve) => res.on('end', () => resolve()));
  t.equal(received.join(''), 'FIRST;SECOND|end');
});

t.test('verify_jwt = true: a credential that verifies, or 401 and the runtime is not called', async (t) => {
  const before = runtime.seen.length;
  const none = await app.call('POST', '/functions/v1/echo', { body: {} });
  t.equal(none.status, 401);
  t.same(none.body, { error: 'missing credentials' });
  const bad = await app.call('POST', '/functions/v1/echo', { token: 'not.a.jwt', body: {} });
  t.equal(bad.status, 401);
  t.same(bad.body, { error: 'invalid or expired token' });
  const wrongKey = await app.call('POST', '/functions/v1/echo', { apikey: 'eyJhbGciOiJIUzI1NiJ9.e30.x', body: {} });
  t.equal(wrongKey.status, 401, 'an apikey that does not verify');
  t.equal(runtime.seen.length, before, 'the runtime saw none of them');
  t.equal((await app.call('POST', '/functions/v1/echo', { apikey: app.anonKey, body: {} })).status, 201, 'the anon key in apikey counts');
  t.equal((await app.call('POST', '/functions/v1/echo', { token: app.anonKey, body: {} })).status, 201, 'and as a Bearer token');
  const user = await userToken('00000000-0000-4000-8000-00000000000b');
  t.equal((await app.call('POST', '/functions/v1/echo', { token: user, body: {} })).status, 201, 'a user access token');
  t.equal((await app.call('POST', '/functions/v1/echo', { token: app.serviceKey, body: {} })).status, 201, 'the service-role key');
});

t.test('verify_jwt = false: no credential check, and a credential that does not verify is not forwarded', async (t) => {
  const none = await app.call('GET', '/functions/v1/open');
  t.equal(none.status, 200);
  t.same(none.body, { open: true });
  const bad = await app.call('GET', '/functions/v1/open', { token: 'garbage', apikey: 'garbage' });
  t.equal(bad.status, 200, 'not even a bad one');
  t.equal(runtime.seen.at(-1)!.headers.authorization, undefined, 'the bad Authorization is dropped');
  t.equal(runtime.seen.at(-1)!.headers.apikey, undefined, 'and the bad apikey');
  const user = await userToken('00000000-0000-4000-8000-00000000000c', { role: 'authenticated' });
  await app.call('GET', '/functions/v1/open', { token: user, apikey: user });
  t.equal(runtime.seen.at(-1)!.headers.authorization, `Bearer ${user}`, 'a token that verifies is forwarded');
  t.equal(runtime.seen.at(-1)!.headers.apikey, undefined, 'a user token is no apikey (only the anon and service-role keys are)');
});

t.test('plinth names the function and proves itself to the runtime; a caller cannot', async (t) => {
  await app.call('POST', '/functions/v1/echo/x', {
    ...anon,
    body: {},
    headers: { 'x-plinth-function': 'teapot', 'x-plinth-runtime-secret': 'guess', 'x-plinth-other': 'no' },
  });
  const seen = runtime.seen.at(-1)!;
  t.equal(seen.url, '/echo/x');
  t.equal(seen.headers['x-plinth-function'], 'echo', "plinth's name, not the caller's");
  t.equal(seen.headers['x-plinth-runtime-secret'], RUNTIME_SECRET, 'EDGE_RUNTIME_SECRET, not the caller\'s guess');
  t.equal(seen.headers['x-plinth-other'], undefined, 'no x-plinth-* header of the caller goes through');

  const noSecret = await startApp(t, { db, env: { EDGE_RUNTIME_URL: runtime.url } });
  await noSecret.call('GET', '/functions/v1/open', { headers: { 'x-plinth-runtime-secret': 'guess' } });
  t.equal(runtime.seen.at(-1)!.headers['x-plinth-runtime-secret'], undefined, 'without EDGE_RUNTIME_SECRET none is sent');
  t.equal(runtime.seen.at(-1)!.headers['x-plinth-function'], 'open');
});

t.test('a suffix that climbs out of the function: 400, the runtime is not called', async (t) => {
  const before = runtime.seen.length;
  for (const path of ['/functions/v1/open/%2e%2e/echo', '/functions/v1/open/..%2Fecho', '/functions/v1/open/a/%2E./..']) {
    const r = await rawGet(app.url, path);
    t.equal(r.status, 400, path);
    t.same(JSON.parse(r.body), { error: 'invalid function path' });
  }
  t.equal(runtime.seen.length, before, 'the runtime saw none of them');
});

t.test('unknown and inactive names: 404 function not found', async (t) => {
  for (const path of ['/functions/v1/nope', '/functions/v1/retired', '/functions/v1/nope/deeper']) {
    const r = await app.call('POST', path, { ...anon, body: {} });
    t.equal(r.status, 404, path);
    t.same(r.body, { error: 'function not found' });
  }
  const ghost = await app.call('POST', '/functions/v1/ghost', { ...anon, body: {} });
  t.equal(ghost.status, 404, 'a row whose runtime has no such function: the runtime says 404');
});

t.test('a runtime that hangs past FUNCTIONS_TIMEOUT_MS: 504', async (t) => {
  const started = Date.now();
  const r = await app.call('POST', '/functions/v1/hang', { body: { x: 1 } });
  t.equal(r.status, 504);
  t.same(r.body, { error: 'edge runtime timed out' });
  t.ok(Date.now() - started >= 350, 'not before the timeout');
});

t.test('an answer that stalls for FUNCTIONS_TIMEOUT_MS is cut', async (t) => {
  const res = await app.fetch('/functions/v1/stall');
  t.equal(res.status, 200, 'the status had come');
  const reader = res.body!.getReader();
  const first = await reader.read();
  t.equal(new TextDecoder().decode(first.value), 'partial', 'and the first bytes');
  await t.rejects(
    (async () => {
      for (;;) if ((await reader.read()).done) return;
    })(),
    'then the connection is cut instead of hanging forever',
  );
});

t.test('the list and refresh endpoints need the service role', async (t) => {
  const list = await app.call('GET', '/functions/v1/', { token: app.serviceKey });
  t.equal(list.status, 200);
  t.same(
    list.body.map((e: { name: string }) => e.name),
    ['echo', 'fail', 'ghost', 'hang', 'open', 'retired', 'stall', 'stream', 'teapot'],
    'every row, by name',
  );
  t.same(list.body.find((e: { name: string }) => e.name === 'retired'), { name: 'retired', runtime: 'deno', status: 'disabled', verify_jwt: false }, 'an Edge function entry (§2.6)');
  t.equal((await app.call('GET', '/functions/v1', { apikey: app.serviceKey })).status, 200, 'without the slash, key in apikey');
  const anonList = await app.call('GET', '/functions/v1/', anon);
  t.equal(anonList.status, 403);
  t.same(anonList.body, { error: 'service role required' });
  t.equal((await app.call('GET', '/functions/v1/')).status, 401, 'no credential');
  const refresh = await app.call('POST', '/functions/v1/_refresh', { token: app.serviceKey });
  t.equal(refresh.status, 200);
  t.same(refresh.body, { ok: true });
  t.equal((await app.call('POST', '/functions/v1/_refresh', anon)).status, 403);
  t.equal((await app.call('POST', '/functions/v1/_refresh')).status, 401);
});

t.test('a runtime that is down: 502; none configured: 503', async (t) => {
  const port = await closedPort();
  const down = await startApp(t, { db, env: { EDGE_RUNTIME_URL: `http://127.0.0.1:${port}` } });
  const r = await down.call('POST', '/functions/v1/open', { body: {} });
  t.equal(r.status, 502);
  t.same(r.body, { error: 'edge runtime unavailable' });

  const none = await startApp(t, { db, env: { FUNCTIONS_DIR: join(tmpdir(), 'plinth-no-such-functions-dir') } });
  const n = await none.call('POST', '/functions/v1/open', { body: {} });
  t.equal(n.status, 503);
  t.same(n.body, { error: 'edge runtime not configured' });
  const unknown = await none.call('POST', '/functions/v1/nope', { body: {} });
  t.equal(unknown.status, 404, 'the catalog still decides first');
});

t.test('the request id goes to the function, and the call is counted by function', async (t) => {
  const r = await app.call('POST', '/functions/v1/echo', { ...anon, body: {}, headers: { 'x-request-id': 'fn-call-9' } });
  t.equal(r.headers.get('x-request-id'), 'fn-call-9');
  t.equal(runtime.seen.at(-1)!.headers['x-request-id'], 'fn-call-9', "the caller's id reaches the function");
  const fresh = await app.call('POST', '/functions/v1/echo', { ...anon, body: {} });
  t.equal(runtime.seen.at(-1)!.headers['x-request-id'], fresh.headers.get('x-request-id'), 'a new id too');
  t.equal((await app.call('POST', '/functions/v1/nope', { ...anon, body: {} })).status, 404);
  const m = await app.call('GET', '/metrics', { token: app.serviceKey });
  const line = m.text.split('\n').find((l) => l.startsWith('plinth_function_invocations_total{function="echo"}'));
  t.ok(line && Number(line.split(' ')[1]) >= 2, 'plinth_function_invocations_total by function');
  t.notOk(/plinth_function_invocations_total\{function="nope"\}/.test(m.text), 'a name outside the catalog is no label');
});
