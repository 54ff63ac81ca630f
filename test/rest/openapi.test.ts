/**
 * GET /rest/v1/ (interface §4.3): an OpenAPI 2.0 document of what the calling role can
 * reach, valid by @apidevtools/swagger-parser (Swagger 2.0 schema plus its semantic checks).
 */
import t from 'tap';
import SwaggerParser from '@apidevtools/swagger-parser';
import { restApp, userToken, USER_A } from './helpers.ts';

const app = await restApp(t);

async function fetchDoc(cred: { token?: string; apikey?: string }) {
  const r = await app.call('GET', '/rest/v1/', cred);
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /^application\/openapi\+json/);
  return r.body as any;
}

t.test('the document is valid Swagger 2.0 for every role', async (t) => {
  for (const cred of [{ apikey: app.anonKey }, { token: app.serviceKey }, { token: await userToken(USER_A) }]) {
    const doc = await fetchDoc(cred);
    t.equal(doc.swagger, '2.0');
    t.equal(doc.basePath, '/rest/v1');
    await t.resolves(SwaggerParser.validate(structuredClone(doc)), 'valid');
  }
  const noSlash = await app.call('GET', '/rest/v1', { apikey: app.anonKey });
  t.equal(noSlash.status, 200, '/rest/v1 without the slash too');
});

t.test('it lists what anon can reach, and only that', async (t) => {
  const doc = await fetchDoc({ apikey: app.anonKey });
  const paths = Object.keys(doc.paths);
  t.ok(paths.includes('/authors'), 'a granted table');
  t.ok(paths.includes('/book_titles'), 'a view');
  t.notOk(paths.includes('/secrets'), 'no grant, not listed');
  for (const name of ['batch', 'webhooks', 'rpc', 'rls-debug']) t.notOk(paths.includes('/' + name), `reserved ${name} left out`);
  t.same(Object.keys(doc.paths['/authors']).sort(), ['delete', 'get', 'patch', 'post']);
  t.same(Object.keys(doc.paths['/reviews']), ['get'], 'select only: only GET');
  t.same(Object.keys(doc.paths['/book_titles']).sort(), ['get', 'post'], 'a view with select and insert');
  t.ok(paths.includes('/rpc/add'), 'a granted function');
  t.notOk(paths.includes('/rpc/not_granted'), 'an ungranted function is left out');
  t.notOk(paths.includes('/rpc/hidden'), 'functions outside public are left out');
});

t.test('service_role sees everything it holds rights on', async (t) => {
  const doc = await fetchDoc({ token: app.serviceKey });
  t.ok(doc.paths['/secrets'], 'secrets for service_role');
  t.same(Object.keys(doc.paths['/secrets']).sort(), ['delete', 'get', 'patch', 'post']);
  t.notOk(doc.paths['/batch']);
});

t.test('definitions carry columns, types, required and keys', async (t) => {
  const doc = await fetchDoc({ apikey: app.anonKey });
  const a = doc.definitions.authors;
  t.equal(a.type, 'object');
  t.equal(a.description, 'People who write books.');
  t.same(a.required, ['name'], 'not null without default');
  t.same(a.properties.id, { type: 'integer', format: 'bigint', description: 'Note:\nThis is a Primary Key.<pk/>' });
  t.same(a.properties.name, { type: 'string', format: 'text', description: 'Full name.' });
  t.same(a.properties.tags, { type: 'array', format: 'text[]', items: { type: 'string', format: 'text' } });
  t.same(a.properties.active, { type: 'boolean', format: 'boolean' });
  t.same(a.properties.rating, { type: 'number', format: 'numeric(3,1)' });
  t.same(a.properties.meta, { format: 'jsonb' });
  t.same(a.properties.mood, { type: 'string', format: 'public.mood' });
  t.same(a.properties.nick, { type: 'string', format: 'public.short_text' }, 'a domain maps by its base type');
  t.match(doc.definitions.books.properties.author_id.description, /Foreign Key to `authors.id`/);
  const get = doc.paths['/authors'].get;
  t.ok(get.parameters.some((p: any) => p.name === 'name' && p.in === 'query'), 'column filters');
  t.ok(get.parameters.some((p: any) => p.$ref === '#/parameters/select'));
  t.same(get.responses['200'].schema, { type: 'array', items: { $ref: '#/definitions/authors' } });
  const rpc = doc.paths['/rpc/greet'].post;
  t.same(rpc.parameters[0].schema.required, ['name'], 'argument without default is required');
  t.same(Object.keys(rpc.parameters[0].schema.properties).sort(), ['greeting', 'name']);
  t.same(doc.paths['/rpc/author_names'].post.responses['200'].schema, { type: 'array', items: { type: 'string', format: 'text' } });
});

t.test('it follows grants after a refresh', async (t) => {
  await app.db.sql`grant select on public.secrets to anon`;
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  const doc = await fetchDoc({ apikey: app.anonKey });
  t.same(Object.keys(doc.paths['/secrets']), ['get']);
  await app.db.sql`revoke select on public.secrets from anon`;
  const again = await fetchDoc({ apikey: app.anonKey });
  t.notOk(again.paths['/secrets'], 'privileges are read per request');
});
