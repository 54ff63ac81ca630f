/**
 * Interface §4.6 and §2.3 over real HTTP: service role only, the defaults, no secret in any
 * answer, the trigger lifecycle seen from the catalog, every bad input a clear 400 that
 * creates nothing, malformed and unknown ids, and the routes winning over a table named
 * `webhooks`.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { userToken } from '../rest/helpers.ts';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

t.test('webhook endpoints (§4.6)', async (t) => {
  const app = await startApp(t, { worker: false });
  const sql = app.db.sql;
  await sql.unsafe(`
    create table public.items (id int primary key);
    create table public.other (id int primary key);
    create view public.items_view as select * from public.items;
    -- A table named like the service route: the route wins (contract §9).
    create table public.webhooks (id int primary key);`);
  const svc = { token: app.serviceKey };
  const hookCount = async () => (await sql`select count(*)::int as n from webhooks_private.hooks`)[0].n as number;
  const triggerOn = async (table: string) =>
    (await sql`select count(*)::int as n from pg_trigger where tgrelid = ${'public.' + table}::regclass and tgname = '_900_plinth_webhooks'`)[0].n as number;

  await t.test('service role only', async (t) => {
    const user = await userToken('00000000-0000-4000-8000-00000000000a');
    const id = '00000000-0000-4000-8000-000000000001';
    const endpoints: [string, string, unknown?][] = [
      ['POST', '/rest/v1/webhooks', { url: 'http://127.0.0.1:1/' }],
      ['GET', '/rest/v1/webhooks'],
      ['DELETE', `/rest/v1/webhooks/${id}`],
      ['GET', `/rest/v1/webhooks/${id}/deliveries`],
    ];
    for (const [method, path, body] of endpoints) {
      const none = await app.call(method, path, { body });
      t.same([none.status, none.body], [401, { error: 'missing credentials' }], `${method} ${path} without credentials`);
      const anon = await app.call(method, path, { body, token: app.anonKey, apikey: app.anonKey });
      t.same([anon.status, anon.body], [403, { error: 'service role required' }], `${method} ${path} with the anon key`);
      const u = await app.call(method, path, { body, token: user });
      t.same([u.status, u.body], [403, { error: 'service role required' }], `${method} ${path} with a user token`);
    }
    const viaApikey = await app.call('GET', '/rest/v1/webhooks', { apikey: app.serviceKey });
    t.equal(viaApikey.status, 200, 'the service-role key in apikey');
    t.equal(await hookCount(), 0, 'nothing created');
  });

  let first: any;
  await t.test('create with the defaults of §2.3', async (t) => {
    const r = await app.call('POST', '/rest/v1/webhooks', { ...svc, body: { url: 'http://127.0.0.1:9/hook' } });
    t.equal(r.status, 201);
    first = r.body;
    t.same(Object.keys(r.body).sort(), ['active', 'created_at', 'events', 'id', 'table_name', 'url']);
    t.match(r.body.id, /^[0-9a-f-]{36}$/);
    t.same(r.body.events, ['*']);
    t.equal(r.body.table_name, '*');
    t.equal(r.body.active, true);
    t.match(r.body.created_at, ISO);
    t.notOk('secret' in r.body);
    const [row] = await sql`select secret from webhooks_private.hooks where id = ${r.body.id}`;
    t.equal(row.secret, '', 'secret defaults to the empty string');
  });

  let items1: any;
  let items2: any;
  await t.test('a table webhook installs the trigger; the secret is never returned', async (t) => {
    t.equal(await triggerOn('items'), 0, 'no trigger before');
    const r = await app.call('POST', '/rest/v1/webhooks', {
      ...svc,
      body: { url: 'https://example.com/in', events: ['DELETE', 'INSERT', 'INSERT'], table_name: 'items', secret: 'top-secret' },
    });
    t.equal(r.status, 201);
    items1 = r.body;
    t.same(r.body.events, ['INSERT', 'DELETE'], 'events kept once each, in a fixed order');
    t.equal(r.body.table_name, 'items');
    t.notOk('secret' in r.body);
    t.notMatch(r.text, /top-secret/);
    t.equal(await triggerOn('items'), 1, 'trigger installed');
    const [tg] = await sql`select p.prosecdef, p.proconfig from pg_trigger g join pg_proc p on p.oid = g.tgfoid
      where g.tgrelid = 'public.items'::regclass and g.tgname = '_900_plinth_webhooks'`;
    t.equal(tg.prosecdef, true, 'SECURITY DEFINER');
    t.same(tg.proconfig, ['search_path=pg_catalog, pg_temp'], 'pinned search_path');
    const r2 = await app.call('POST', '/rest/v1/webhooks', { ...svc, body: { url: 'http://127.0.0.1:9/two', table_name: 'items' } });
    items2 = r2.body;
    t.equal(await triggerOn('items'), 1, 'one trigger shared by two webhooks');
    const list = await app.call('GET', '/rest/v1/webhooks', svc);
    t.equal(list.status, 200);
    t.same(list.body.map((h: any) => h.id), [first.id, items1.id, items2.id], 'oldest first');
    t.notMatch(list.text, /top-secret|"secret"/, 'no secret in the list');
    t.same(list.body[1], items1);
  });

  await t.test('bad input: 400 and nothing created', async (t) => {
    const before = await hookCount();
    const cases: [string, unknown, string][] = [
      ['missing url', { events: ['*'] }, 'url is required'],
      ['url not a string', { url: 42 }, 'url must be an http or https URL'],
      ['url null', { url: null }, 'url must be an http or https URL'],
      ['ftp url', { url: 'ftp://example.com/x' }, 'url must be an http or https URL'],
      ['relative url', { url: '/hook' }, 'url must be an http or https URL'],
      ['no host', { url: 'http://' }, 'url must be an http or https URL'],
      ['not a url', { url: 'not a url' }, 'url must be an http or https URL'],
      ['javascript url', { url: 'javascript:alert(1)' }, 'url must be an http or https URL'],
      ['events not an array', { url: 'http://x.test/', events: 'INSERT' }, 'events must be an array of INSERT, UPDATE, DELETE or *'],
      ['events null', { url: 'http://x.test/', events: null }, 'events must be an array of INSERT, UPDATE, DELETE or *'],
      ['events empty', { url: 'http://x.test/', events: [] }, 'events must be an array of INSERT, UPDATE, DELETE or *'],
      ['unknown event', { url: 'http://x.test/', events: ['INSERT', 'TRUNCATE'] }, 'events must be an array of INSERT, UPDATE, DELETE or *'],
      ['lower-case event', { url: 'http://x.test/', events: ['insert'] }, 'events must be an array of INSERT, UPDATE, DELETE or *'],
      ['event not a string', { url: 'http://x.test/', events: [1] }, 'events must be an array of INSERT, UPDATE, DELETE or *'],
      ['unknown table', { url: 'http://x.test/', table_name: 'nope' }, 'invalid request'],
      ['a view', { url: 'http://x.test/', table_name: 'items_view' }, 'invalid request'],
      ['a table outside public', { url: 'http://x.test/', table_name: 'users' }, 'invalid request'],
      ['schema-qualified', { url: 'http://x.test/', table_name: 'public.items' }, 'invalid request'],
      ['table_name not a string', { url: 'http://x.test/', table_name: 7 }, 'invalid request'],
      ['empty table_name', { url: 'http://x.test/', table_name: '' }, 'invalid request'],
      ['secret not a string', { url: 'http://x.test/', secret: 123 }, 'invalid request body'],
      ['body an array', [{ url: 'http://x.test/' }], 'invalid request body'],
      ['body a string', 'http://x.test/', 'invalid request body'],
    ];
    for (const [what, body, error] of cases) {
      const r = await app.call('POST', '/rest/v1/webhooks', { ...svc, body });
      t.same([r.status, r.body], [400, { error }], what);
    }
    const bad = await app.call('POST', '/rest/v1/webhooks', { ...svc, raw: '{"url": ', headers: { 'content-type': 'application/json' } });
    t.same([bad.status, bad.body], [400, { error: 'invalid request body' }], 'malformed JSON');
    const empty = await app.call('POST', '/rest/v1/webhooks', { ...svc, raw: '', headers: { 'content-type': 'application/json' } });
    t.same([empty.status, empty.body], [400, { error: 'invalid request body' }], 'no body');
    t.equal(await hookCount(), before, 'nothing created');
    t.equal(await triggerOn('other'), 0, 'no trigger installed');
  });

  await t.test('delete: malformed id 400, unknown 404, the last webhook of a table takes its trigger', async (t) => {
    const bad = await app.call('DELETE', '/rest/v1/webhooks/not-a-uuid', svc);
    t.same([bad.status, bad.body], [400, { error: 'invalid webhook id' }]);
    const unknown = await app.call('DELETE', '/rest/v1/webhooks/00000000-0000-4000-8000-000000000999', svc);
    t.same([unknown.status, unknown.body], [404, { error: 'webhook not found' }]);
    const d1 = await app.call('DELETE', `/rest/v1/webhooks/${items1.id}`, svc);
    t.same([d1.status, d1.body], [200, { message: 'webhook deleted' }]);
    t.equal(await triggerOn('items'), 1, 'still one webhook on items: the trigger stays');
    const again = await app.call('DELETE', `/rest/v1/webhooks/${items1.id}`, svc);
    t.same([again.status, again.body], [404, { error: 'webhook not found' }], 'a deleted webhook is unknown');
    const d2 = await app.call('DELETE', `/rest/v1/webhooks/${items2.id}`, svc);
    t.equal(d2.status, 200);
    t.equal(await triggerOn('items'), 0, 'the last webhook took the trigger');
    const d3 = await app.call('DELETE', `/rest/v1/webhooks/${first.id}`, svc);
    t.equal(d3.status, 200, 'a `*` webhook deletes without any trigger');
    const list = await app.call('GET', '/rest/v1/webhooks', svc);
    t.same(list.body, []);
  });

  await t.test('deliveries: malformed id, unknown id, limit', async (t) => {
    const bad = await app.call('GET', '/rest/v1/webhooks/xyz/deliveries', svc);
    t.same([bad.status, bad.body], [400, { error: 'invalid webhook id' }]);
    const unknown = await app.call('GET', '/rest/v1/webhooks/00000000-0000-4000-8000-000000000999/deliveries', svc);
    t.same([unknown.status, unknown.body], [404, { error: 'webhook not found' }]);
    const h = await app.call('POST', '/rest/v1/webhooks', { ...svc, body: { url: 'http://127.0.0.1:9/' } });
    const ok = await app.call('GET', `/rest/v1/webhooks/${h.body.id}/deliveries`, svc);
    t.same([ok.status, ok.body], [200, []]);
    for (const l of ['0', '-1', '1001', 'abc', '1.5', '']) {
      const r = await app.call('GET', `/rest/v1/webhooks/${h.body.id}/deliveries?limit=${l}`, svc);
      t.same([r.status, r.body], [400, { error: 'limit must be an integer from 1 to 1000' }], `limit=${l}`);
    }
    t.equal((await app.call('GET', `/rest/v1/webhooks/${h.body.id}/deliveries?limit=1000`, svc)).status, 200);
  });

  await t.test('the routes win over a table named webhooks', async (t) => {
    await sql`insert into public.webhooks values (1)`;
    await sql`grant select on public.webhooks to anon`;
    await app.call('POST', '/api/catalog/refresh', svc);
    const r = await app.call('GET', '/rest/v1/webhooks', svc);
    t.equal(r.status, 200);
    t.ok(Array.isArray(r.body) && r.body.every((h: any) => typeof h.url === 'string'), 'the webhook list, not the table');
    const anon = await app.call('GET', '/rest/v1/webhooks', { token: app.anonKey });
    t.same([anon.status, anon.body], [403, { error: 'service role required' }]);
  });
});
