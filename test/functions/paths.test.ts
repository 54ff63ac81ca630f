/**
 * A path that climbs out of the function, against a real plinth and the bundled Deno
 * runtime. `public` (verify_jwt = false) is the way in; the targets are functions whose
 * files exist but which plinth must not let the caller reach: one whose row is disabled,
 * one without a row, one with verify_jwt = true (called with a forged service-role token).
 * Every spelling of `..` (raw, percent-encoded in any case, mixed, via `%2f` or a
 * backslash) is refused with 400 before the runtime is called. The runtime itself serves
 * only plinth (a per-start secret) and only the function plinth names; a credential that
 * does not verify never reaches a function, nor do plinth's internal headers.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { bundledRuntime } from '../../src/functions/index.ts';
import { rawGet } from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'plinth-functions-paths-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** Each function says who it is and what reached it. */
function writeFunction(name: string): void {
  mkdirSync(join(dir, name), { recursive: true });
  writeFileSync(
    join(dir, name, 'index.ts'),
    `export default (req: Request): Response => {
  const internal: string[] = [];
  req.headers.forEach((_v, k) => { if (k.startsWith('x-plinth-')) internal.push(k); });
  return Response.json({ reached: '${name}', path: new URL(req.url).pathname, authorization: req.headers.get('authorization'),
    apikey: req.headers.get('apikey'), internal });
};
`,
  );
}
for (const name of ['public', 'secret_disabled', 'secret_missing', 'secret_jwt']) writeFunction(name);

const db = await createTestDatabase(t);
await db.sql`insert into edge.functions (name, runtime, status, verify_jwt) values
  ('public', 'deno', 'active', false),
  ('secret_disabled', 'deno', 'disabled', false),
  ('secret_jwt', 'deno', 'active', true)`;
const app = await startApp(t, { db, env: { FUNCTIONS_DIR: dir } });
const runtime = bundledRuntime(app.service.app)!.member('public');

/** A token claiming the service role, signed with a key that is not plinth's. */
const forged = await new SignJWT({ role: 'service_role' })
  .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
  .setIssuedAt()
  .setExpirationTime('1h')
  .sign(new TextEncoder().encode('not-the-secret-not-the-secret-not-the-secret'));

const CLIMBS = [
  '/functions/v1/public/%2e%2e/{target}',
  '/functions/v1/public/%2E%2E/{target}',
  '/functions/v1/public/%2e%2E/{target}',
  '/functions/v1/public/.%2e/{target}',
  '/functions/v1/public/%2E./{target}',
  '/functions/v1/public/../{target}',
  '/functions/v1/public/x/../../{target}',
  '/functions/v1/public/./../{target}',
  '/functions/v1/public/..%2f{target}',
  '/functions/v1/public/..%2F{target}',
  '/functions/v1/public/%2e%2e%2f{target}',
  '/functions/v1/public/..%5c{target}',
  '/functions/v1/public/..\\{target}',
  '/functions/v1/public/%2e%2e/{target}?x=1',
];

t.test('the functions are there: public answers, the targets are refused when called by name', async (t) => {
  const pub = await rawGet(app.url, '/functions/v1/public/some/path');
  t.equal(pub.status, 200);
  t.match(JSON.parse(pub.body), { reached: 'public', path: '/public/some/path' });
  t.equal((await rawGet(app.url, '/functions/v1/secret_disabled')).status, 404, 'disabled');
  t.equal((await rawGet(app.url, '/functions/v1/secret_missing')).status, 404, 'no catalog row');
  t.equal((await rawGet(app.url, '/functions/v1/secret_jwt', { authorization: `Bearer ${forged}` })).status, 401, 'forged token');
});

t.test('a path that climbs out of public reaches none of them: 400 invalid function path', async (t) => {
  for (const target of ['secret_disabled', 'secret_missing', 'secret_jwt']) {
    for (const climb of CLIMBS) {
      const path = climb.replace('{target}', target);
      const r = await rawGet(app.url, path, { authorization: `Bearer ${forged}`, apikey: forged });
      t.equal(r.status, 400, path);
      t.same(JSON.parse(r.body), { error: 'invalid function path' }, path);
      t.notMatch(r.body, /reached/, `${path}: no function answered`);
    }
  }
});

t.test('the segments forwarded are the ones checked, encoded again', async (t) => {
  const r = await rawGet(app.url, '/functions/v1/public/a%3Ab/%7Euser/c%20d/..x/%2e%2e%2e/%252e%252e?q=%2e%2e');
  t.equal(r.status, 200);
  t.equal(JSON.parse(r.body).path, '/public/a:b/~user/c%20d/..x/.../%252e%252e', 'dots that are not a step up, and an escaped %, pass');
  const bad = await rawGet(app.url, '/functions/v1/public/%zz');
  t.equal(bad.status, 400, 'a malformed escape (refused by the router before the function is looked up)');
  t.match(JSON.parse(bad.body), { error: String });
});

t.test('the runtime serves only plinth: no secret, a wrong one, or a name that is not the path: refused', async (t) => {
  const base = runtime.url!;
  const secret = runtime.secret!;
  t.ok(secret.length >= 32, 'a secret per start');
  const none = await rawGet(base, '/secret_jwt');
  t.equal(none.status, 401, 'a local process without the secret');
  t.same(JSON.parse(none.body), { error: 'invalid runtime secret' });
  const wrong = await rawGet(base, '/secret_jwt', { 'x-plinth-runtime-secret': secret.slice(0, -1) + (secret.endsWith('A') ? 'B' : 'A'), 'x-plinth-function': 'secret_jwt' });
  t.equal(wrong.status, 401, 'a wrong secret');
  const other = await rawGet(base, '/secret_jwt', { 'x-plinth-runtime-secret': secret, 'x-plinth-function': 'public' });
  t.equal(other.status, 400, 'a path whose function is not the one named');
  t.same(JSON.parse(other.body), { error: 'invalid function path' });
  for (const path of ['/public/../secret_jwt', '/public/%2e%2e/secret_jwt', '/public/..\\secret_jwt']) {
    const climb = await rawGet(base, path, { 'x-plinth-runtime-secret': secret, 'x-plinth-function': 'public' });
    t.equal(climb.status, 400, `${path}: the runtime refuses a climb too`);
    t.notMatch(climb.body, /reached/);
  }
  const ok = await rawGet(base, '/public/x', { 'x-plinth-runtime-secret': secret, 'x-plinth-function': 'public' });
  t.equal(ok.status, 200, 'with the secret and the right name it serves');
  t.same(JSON.parse(ok.body).internal, [], 'and the function does not see the internal headers');
});

t.test('a caller cannot send the internal headers through plinth', async (t) => {
  const r = await rawGet(app.url, '/functions/v1/public', { 'x-plinth-function': 'secret_jwt', 'x-plinth-runtime-secret': 'guess' });
  t.equal(r.status, 200);
  t.match(JSON.parse(r.body), { reached: 'public', internal: [] });
});

t.test('a credential that does not verify does not reach a verify_jwt = false function', async (t) => {
  const forgedCall = await rawGet(app.url, '/functions/v1/public', { authorization: `Bearer ${forged}`, apikey: forged });
  t.equal(forgedCall.status, 200, 'the call goes on');
  t.match(JSON.parse(forgedCall.body), { reached: 'public', authorization: null, apikey: null }, 'without the forged credential');
  const basic = await rawGet(app.url, '/functions/v1/public', { authorization: 'Basic dXNlcjpwYXNz' });
  t.equal(JSON.parse(basic.body).authorization, null, 'nor another scheme');
  const anon = await rawGet(app.url, '/functions/v1/public', { authorization: `Bearer ${app.anonKey}`, apikey: app.anonKey });
  t.match(JSON.parse(anon.body), { authorization: `Bearer ${app.anonKey}`, apikey: app.anonKey }, 'one that verifies is forwarded');
  const mixed = await rawGet(app.url, '/functions/v1/secret_jwt', { authorization: `Bearer ${app.serviceKey}`, apikey: forged });
  t.equal(mixed.status, 200, 'verify_jwt = true with a good token');
  t.match(JSON.parse(mixed.body), { reached: 'secret_jwt', authorization: `Bearer ${app.serviceKey}`, apikey: null }, 'and a forged apikey beside it is dropped');
});
