/**
 * The service-role gate, one hook for every endpoint only the service role may call
 * (docs/decisions/0100-the-role-is-judged-before-the-body.md): without a credential 401,
 * with another role's 403, and that before the body is read, so a caller without the role
 * learns nothing about what a body would have to be. The service role passes, and the
 * handler gets its credential.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';

/** Every gated route; `body` marks those that read one. */
const ROUTES: Array<[method: string, path: string, body: boolean]> = [
  ['POST', '/api/sql', true],
  ['POST', '/api/demo', true],
  ['POST', '/api/catalog/refresh', false],
  ['GET', '/auth/v1/admin/users', false],
  ['POST', '/auth/v1/admin/users', true],
  ['DELETE', '/auth/v1/admin/users/11111111-1111-4111-8111-111111111111', false],
  ['POST', '/rest/v1/webhooks', true],
  ['GET', '/rest/v1/webhooks', false],
  ['DELETE', '/rest/v1/webhooks/1', false],
  ['GET', '/rest/v1/webhooks/1/deliveries', false],
  ['POST', '/storage/v1/bucket', true],
  ['DELETE', '/storage/v1/bucket/photos', false],
  ['GET', '/functions/v1', false],
  ['GET', '/functions/v1/', false],
  ['POST', '/functions/v1/_refresh', false],
];

t.test('service-role endpoints: 401, 403, and the role before the body', async (t) => {
  const app = await startApp(t, { worker: false, env: { ENABLE_SQL_ENDPOINT: 'true', ENABLE_DEMO_ENDPOINT: 'true' } });
  const json = { 'content-type': 'application/json' };
  for (const [method, path, body] of ROUTES) {
    const name = `${method} ${path}`;
    let r = await app.call(method, path, body ? { raw: '{}', headers: json } : {});
    t.same([r.status, r.body], [401, { error: 'missing credentials' }], `${name}: no credential`);
    r = await app.call(method, path, { token: app.anonKey, ...(body ? { raw: '{}', headers: json } : {}) });
    t.same([r.status, r.body], [403, { error: 'service role required' }], `${name}: the anon key`);
    if (body) {
      r = await app.call(method, path, { token: app.anonKey, raw: '{"not json', headers: json });
      t.same([r.status, r.body], [403, { error: 'service role required' }], `${name}: a malformed body is not looked at without the role`);
    }
  }

  // The handlers that use the caller's credential get it from the gate.
  let r = await app.call('POST', '/storage/v1/bucket', { token: app.serviceKey, body: { id: 'photos' } });
  t.equal(r.status, 201, 'the service role creates a bucket');
  r = await app.call('DELETE', '/storage/v1/bucket/photos', { token: app.serviceKey });
  t.same([r.status, r.body], [200, { message: 'bucket deleted' }], 'and deletes it');
  r = await app.call('GET', '/functions/v1/', { token: app.serviceKey });
  t.equal(r.status, 200, 'the service role lists the functions');
  t.ok(Array.isArray(r.body));
  r = await app.call('POST', '/storage/v1/bucket', { token: app.serviceKey, raw: '{"not json', headers: json });
  t.same([r.status, r.body], [400, { error: 'invalid request body' }], 'with the role, a malformed body is refused as such');
});
