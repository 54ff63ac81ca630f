/**
 * POST /rest/v1/batch (interface §2.8, §3.5, §4.5, §8; contract §9): atomic and partial
 * modes, templates, the refusals before anything runs, MAX_BATCH_OPERATIONS, automatic
 * ids, RLS context, and the database state after each outcome.
 */
import t from 'tap';
import { restApp, SEED_SQL, userToken, USER_A } from './helpers.ts';

const app = await restApp(t, { sql: SEED_SQL, env: { MAX_BATCH_OPERATIONS: '6' } });
const sql = app.db.sql;
const batch = (body: unknown, cred: { token?: string; apikey?: string } = { apikey: app.anonKey }) =>
  app.call('POST', '/rest/v1/batch', { ...cred, body });
const count = async (where: string) => (await sql.unsafe(`select count(*)::int as n from public.books where ${where}`))[0].n as number;

t.test('atomic success: 200, results in order, templates, everything persisted', async (t) => {
  const r = await batch({
    operations: [
      { id: 'author', method: 'POST', path: '/rest/v1/authors', body: { name: 'Batch Author', meta: { nested: { key: 'deep' } } } },
      { id: 'book', method: 'POST', path: '/rest/v1/books', body: { title: 'Batch Book', author_id: '{{author.id}}', pages: 10 } },
      { method: 'POST', path: '/rest/v1/books', body: [{ title: 'Batch Two', author_id: '{{author.0.id}}' }, { title: 'Batch Three', author_id: '{{author.id}}' }] },
      { id: 'list', method: 'GET', path: '/rest/v1/books', query: 'author_id=eq.{{author.id}}&select=id,title,authors(meta)&order=id' },
      { method: 'PATCH', path: '/rest/v1/books', query: 'id=in.({{list.*.id}})&select=id,pages', body: { pages: '{{book.pages}}' } },
      { method: 'POST', path: '/rest/v1/rpc/greet', body: { name: '{{author.meta.nested.key}} {{list.1.title}}' } },
    ],
  });
  t.equal(r.status, 200);
  const results = r.body.results as any[];
  t.same(results.map((x) => [x.id, x.status]), [
    ['author', 201],
    ['book', 201],
    ['op2', 201],
    ['list', 200],
    ['op4', 200],
    ['op5', 200],
  ], 'ids (automatic op<index>) and statuses');
  const authorId = results[0].data[0].id;
  t.equal(results[1].data[0].author_id, authorId, '{{op.field}} on a one-element array reads that element, keeping the number');
  t.same(results[2].data.map((b: any) => b.author_id), [authorId, authorId], '{{op.0.field}}');
  t.same(results[3].data.map((b: any) => b.title), ['Batch Book', 'Batch Two', 'Batch Three']);
  t.same(results[3].data[0].authors, { meta: { nested: { key: 'deep' } } }, 'embedding inside a batch');
  t.same(results[4].data.map((b: any) => b.pages), [10, 10, 10], '{{op.*.field}} for in.(…)');
  t.equal(results[5].data, 'hello, deep Batch Two', 'nested dot path and templates inside a string');
  t.equal(await count(`author_id = ${authorId} and pages = 10`), 3, 'persisted');
});

t.test('atomic failure: 422, results up to the failed one, everything rolled back', async (t) => {
  const before = await count('true');
  const r = await batch({
    operations: [
      { id: 'first', method: 'POST', path: '/rest/v1/books', body: { title: 'Rolled back' } },
      { id: 'second', method: 'PATCH', path: '/rest/v1/books', query: 'id=eq.1', body: { pages: 1 } },
      { id: 'dup', method: 'POST', path: '/rest/v1/authors', body: { name: 'Italo Calvino' } },
      { id: 'never', method: 'POST', path: '/rest/v1/books', body: { title: 'Never run' } },
    ],
  });
  t.equal(r.status, 422);
  t.equal(r.body.failed_operation, 'dup');
  t.equal(r.body.error, 'operation dup failed: duplicate value violates unique constraint');
  const results = r.body.results as any[];
  t.same(results.map((x) => [x.id, x.status]), [
    ['first', 201],
    ['second', 200],
    ['dup', 409],
  ]);
  t.equal(results[2].error, 'duplicate value violates unique constraint');
  t.equal(await count('true'), before, 'no book added');
  t.equal(await count(`title in ('Rolled back', 'Never run')`), 0);
  t.equal((await sql`select pages from public.books where id = 1`)[0].pages, 304, 'the PATCH was rolled back');
});

t.test('atomic failure before SQL (unknown column, unresolved template) also rolls back', async (t) => {
  const r = await batch({
    operations: [
      { method: 'POST', path: '/rest/v1/books', body: { title: 'Gone again' } },
      { method: 'GET', path: '/rest/v1/books', query: 'nosuch=eq.1' },
    ],
  });
  t.equal(r.status, 422);
  t.equal(r.body.failed_operation, 'op1');
  t.equal(r.body.error, 'operation op1 failed: unknown column in request');
  t.equal(r.body.results[1].status, 400);
  t.equal(await count(`title = 'Gone again'`), 0);

  const tpl = await batch({
    operations: [
      { id: 'x', method: 'POST', path: '/rest/v1/books', body: { title: 'Gone too' } },
      { method: 'GET', path: '/rest/v1/books', query: 'id=eq.{{x.nosuch}}' },
    ],
  });
  t.equal(tpl.status, 422);
  t.equal(tpl.body.error, 'operation op1 failed: unresolved template {{x.nosuch}}');
  t.same(tpl.body.results[1], { id: 'op1', status: 400, error: 'unresolved template {{x.nosuch}}' });
  t.equal(await count(`title = 'Gone too'`), 0);
});

t.test('partial mode: a failure in the middle, the operations around it persist (207)', async (t) => {
  const r = await batch({
    atomic: false,
    operations: [
      { id: 'p0', method: 'POST', path: '/rest/v1/books', body: { title: 'Partial 0' } },
      { id: 'p1', method: 'POST', path: '/rest/v1/books', body: { title: 'Partial 1' } },
      { id: 'p2', method: 'POST', path: '/rest/v1/books', body: { id: 1, title: 'Duplicate id' } },
      { id: 'p3', method: 'PATCH', path: '/rest/v1/books', query: 'id=eq.{{p1.id}}&select=title', body: { title: 'Partial 1 edited' } },
      { id: 'p4', method: 'POST', path: '/rest/v1/rpc/fail' },
      { id: 'p5', method: 'GET', path: '/rest/v1/books', query: "title=like.Partial*&select=title&order=title" },
    ],
  });
  t.equal(r.status, 207);
  const results = r.body.results as any[];
  t.same(results.map((x) => [x.id, x.status]), [
    ['p0', 201],
    ['p1', 201],
    ['p2', 409],
    ['p3', 200],
    ['p4', 500],
    ['p5', 200],
  ]);
  t.equal(results[2].error, 'duplicate value violates unique constraint');
  t.equal(results[4].error, 'internal database error', 'exception text never returned');
  t.notMatch(r.text, /secret internal detail/);
  t.same(results[5].data, [{ title: 'Partial 0' }, { title: 'Partial 1 edited' }], 'later operations see earlier ones');
  t.same((await sql`select title from public.books where title like 'Partial%' order by title`).map((x) => x.title), ['Partial 0', 'Partial 1 edited']);
  t.equal(results[0].error, undefined, 'a success carries no error');
  t.equal(results[2].data, undefined, 'a failure carries no data');
});

t.test('partial mode: all succeed is 200; a template on a failed operation is unresolved', async (t) => {
  const ok = await batch({ atomic: false, operations: [{ method: 'GET', path: '/rest/v1/authors', query: 'select=id&id=eq.1' }] });
  t.equal(ok.status, 200);
  t.same(ok.body, { results: [{ id: 'op0', status: 200, data: [{ id: 1 }] }] });
  const r = await batch({
    atomic: false,
    operations: [
      { id: 'bad', method: 'POST', path: '/rest/v1/authors', body: { name: 'Ursula Le Guin' } },
      { method: 'GET', path: '/rest/v1/authors', query: 'id=eq.{{bad.id}}' },
    ],
  });
  t.equal(r.status, 207);
  t.same(r.body.results[1], { id: 'op1', status: 400, error: 'unresolved template {{bad.id}}' });
});

t.test('template rules', async (t) => {
  const run = (ops: unknown[]) => batch({ atomic: false, operations: ops });
  const two = { id: 'two', method: 'GET', path: '/rest/v1/authors', query: 'select=id,name&id=in.(1,2)&order=id' };
  const none = { id: 'none', method: 'GET', path: '/rest/v1/authors', query: 'select=id&id=eq.999' };
  const cases: [string, string, number, unknown][] = [
    ['{{two.0.name}}', 'index', 200, [{ id: 1 }]],
    ['{{two.1.name}}', 'second index', 200, [{ id: 2 }]],
    ['{{two.name}}', 'field of a longer array', 400, 'unresolved template {{two.name}}'],
    ['{{two.5.name}}', 'index out of range', 400, 'unresolved template {{two.5.name}}'],
    ['{{none.name}}', 'field of an empty array', 400, 'unresolved template {{none.name}}'],
    ['{{later.name}}', 'a later operation', 400, 'unresolved template {{later.name}}'],
    ['{{nobody.name}}', 'an unknown operation', 400, 'unresolved template {{nobody.name}}'],
  ];
  for (const [tpl, what, status, expect] of cases) {
    const r = await run([two, none, { method: 'GET', path: '/rest/v1/authors', query: `select=id&name=eq.${tpl}` }, { id: 'later', method: 'GET', path: '/rest/v1/authors', query: 'select=name' }]);
    const res = r.body.results[2];
    t.equal(res.status, status, what);
    if (status === 200) t.same(res.data, expect, what);
    else t.equal(res.error, expect, what);
  }
  const star = await run([two, { method: 'GET', path: '/rest/v1/authors', query: 'select=id&name=in.({{two.*.name}})&order=id' }]);
  t.same(star.body.results[1].data, [{ id: 1 }, { id: 2 }], '{{op.*.field}} quotes elements as needed (names with spaces)');
  const whole = await run([
    two,
    { method: 'POST', path: '/rest/v1/rpc/sum_all', body: { nums: '{{two.*.id}}' } },
    { method: 'POST', path: '/rest/v1/rpc/echo', body: { payload: { ids: '{{two.*.id}}', first: '{{two.0}}', text: 'id {{two.0.id}}' } } },
  ]);
  t.equal(whole.body.results[1].data, 3, 'a whole-string * template is an array');
  t.same(whole.body.results[2].data, { ids: [1, 2], first: { id: 1, name: 'Ursula Le Guin' }, text: 'id 1' }, 'objects and text');
  const special = await run([
    { id: 's', method: 'POST', path: '/rest/v1/authors', body: { name: 'A&B=C, "D"' } },
    { method: 'GET', path: '/rest/v1/authors', query: 'select=name&name=eq.{{s.name}}' },
  ]);
  t.same(special.body.results[1].data, [{ name: 'A&B=C, "D"' }], 'values are encoded into the query string');
});

t.test('RPC operations: body only, query ignored for any method', async (t) => {
  const r = await batch({
    operations: [
      { method: 'GET', path: '/rest/v1/rpc/author_names', query: 'nosuch=1' },
      { method: 'POST', path: '/rest/v1/rpc/add', query: 'a=100', body: { a: 1, b: 2 } },
      { method: 'GET', path: '/rest/v1/rpc/stats' },
    ],
  });
  t.equal(r.status, 200);
  t.same(r.body.results.map((x: any) => x.status), [200, 200, 200]);
  t.equal(r.body.results[1].data, 3);
  t.same(r.body.results[2].data, { total: await count('true'), max_pages: 387 }, 'OUT parameters');
  const withArgs = await batch({ operations: [{ method: 'GET', path: '/rest/v1/rpc/add', query: 'a=1&b=2' }] });
  t.equal(withArgs.status, 422, 'a GET RPC operation calls with no arguments');
  t.equal(withArgs.body.error, 'operation op0 failed: invalid request');
  const unknown = await batch({ operations: [{ method: 'POST', path: '/rest/v1/rpc/nosuch' }] });
  t.equal(unknown.body.results[0].status, 404);
  t.equal(unknown.body.error, 'operation op0 failed: function not found');
});

t.test('refused before anything runs (400)', async (t) => {
  const good = { method: 'POST', path: '/rest/v1/books', body: { title: 'Must not exist' } };
  const cases: [unknown, string][] = [
    [{ operations: [good, { method: 'PUT', path: '/rest/v1/books' }] }, 'operation op1 is not allowed: PUT /rest/v1/books'],
    [{ operations: [good, { method: 'HEAD', path: '/rest/v1/books' }] }, 'operation op1 is not allowed: HEAD /rest/v1/books'],
    [{ operations: [good, { method: 'GET', path: '/auth/v1/user' }] }, 'operation op1 is not allowed: GET /auth/v1/user'],
    [{ operations: [good, { method: 'GET', path: 'rest/v1/books' }] }, 'operation op1 is not allowed: GET rest/v1/books'],
    [{ operations: [good, { method: 'PATCH', path: '/rest/v1/rpc/add' }] }, 'operation op1 is not allowed: PATCH /rest/v1/rpc/add'],
    [{ operations: [good, { method: 'DELETE', path: '/rest/v1/rpc/add' }] }, 'operation op1 is not allowed: DELETE /rest/v1/rpc/add'],
    [{ operations: [good, { method: 'POST', path: '/rest/v1/batch' }] }, 'operation op1 is not allowed: POST /rest/v1/batch'],
    [{ operations: [good, { method: 'GET', path: '/rest/v1/webhooks' }] }, 'operation op1 is not allowed: GET /rest/v1/webhooks'],
    [{ operations: [good, { method: 'GET', path: '/rest/v1/rls-debug' }] }, 'operation op1 is not allowed: GET /rest/v1/rls-debug'],
    [{ operations: [good, { method: 'GET', path: '/rest/v1/rpc' }] }, 'operation op1 is not allowed: GET /rest/v1/rpc'],
    [{ operations: [good, { method: 'GET', path: '/rest/v1/' }] }, 'operation op1 is not allowed: GET /rest/v1/'],
    [{ operations: [good, { method: 'GET', path: '/rest/v1/books/1' }] }, 'operation op1 is not allowed: GET /rest/v1/books/1'],
    [{ operations: [good, { id: 'op0', method: 'GET', path: '/rest/v1/books' }] }, 'duplicate operation id op0'],
    [{ operations: [good, good, good, good, good, good, good] }, 'too many operations: at most 6 (MAX_BATCH_OPERATIONS)'],
    [{ operations: [good, { path: '/rest/v1/books' }] }, 'invalid request body'],
    [{ operations: [good, { method: 'GET', path: '/rest/v1/books', query: 5 }] }, 'invalid request body'],
    [{ operations: [good, { method: 'POST', path: '/rest/v1/books', body: 'text' }] }, 'invalid request body'],
    [{ operations: [good, 'GET /rest/v1/books'] }, 'invalid request body'],
    [{ atomic: 'yes', operations: [good] }, 'invalid request body'],
    [{ operations: { op: good } }, 'invalid request body'],
    [{}, 'invalid request body'],
    [[good], 'invalid request body'],
  ];
  for (const [body, error] of cases) {
    const r = await batch(body);
    t.equal(r.status, 400, error);
    t.same(r.body, { error }, error);
  }
  const empty = await app.call('POST', '/rest/v1/batch', { apikey: app.anonKey, raw: '', headers: { 'content-type': 'application/json' } });
  t.equal(empty.status, 400, 'no body');
  t.equal(await count(`title = 'Must not exist'`), 0, 'nothing ran');
  const max = await batch({ operations: Array.from({ length: 6 }, () => ({ method: 'GET', path: '/rest/v1/loners' })) });
  t.equal(max.status, 200, 'exactly MAX_BATCH_OPERATIONS is fine');
  const zero = await batch({ operations: [] });
  t.equal(zero.status, 200);
  t.same(zero.body, { results: [] });
});

t.test('one transaction under the caller: RLS and claims', async (t) => {
  const token = await userToken(USER_A);
  const r = await batch(
    {
      operations: [
        { id: 'n', method: 'POST', path: '/rest/v1/notes', body: { body: 'batch note' } },
        { method: 'GET', path: '/rest/v1/rpc/whoami' },
        { method: 'GET', path: '/rest/v1/notes', query: 'select=owner,body' },
      ],
    },
    { token },
  );
  t.equal(r.status, 200);
  t.equal(r.body.results[0].data[0].owner, USER_A, 'auth.uid() inside the batch');
  t.same(r.body.results[1].data, { role: 'authenticated', sub: USER_A });
  t.same(r.body.results[2].data, [{ owner: USER_A, body: 'batch note' }]);
  const anon = await batch({ operations: [{ method: 'GET', path: '/rest/v1/notes', query: 'select=body' }, { method: 'GET', path: '/rest/v1/secrets' }] });
  t.equal(anon.status, 422);
  t.same(anon.body.results, [
    { id: 'op0', status: 200, data: [] },
    { id: 'op1', status: 403, error: 'permission denied' },
  ]);
  const svc = await batch({ operations: [{ method: 'GET', path: '/rest/v1/notes', query: 'select=body' }] }, { token: app.serviceKey });
  t.same(svc.body.results[0].data, [{ body: 'batch note' }], 'service_role bypasses RLS');
});

t.test('rows written earlier in the batch are visible to later operations, and to nobody else until commit', async (t) => {
  const r = await batch({
    operations: [
      { id: 'w', method: 'POST', path: '/rest/v1/loners', body: { id: 5 } },
      { method: 'GET', path: '/rest/v1/loners', query: 'id=eq.5' },
    ],
  }, { token: app.serviceKey });
  t.equal(r.status, 200);
  t.same(r.body.results[1].data, [{ id: 5 }]);
});
