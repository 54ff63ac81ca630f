/**
 * In development mode the log line of a 4xx says why, in words, next to the request id:
 * PostgreSQL's message with its column and constraint, or the check of plinth's that refused
 * (a PATCH without a filter). The response keeps the interface's message; outside
 * development mode the line keeps no database text.
 */
import t, { type Test } from 'tap';
import { startApp } from '../helpers/app.ts';
import { captureLog } from '../helpers/log-capture.ts';

const SETUP = `
create table public.todo_errs (id int primary key, title text not null, n int check (n > 0));
grant select, insert, update, delete on public.todo_errs to anon;
`;

async function refusals(t: Test, dev: boolean) {
  const { lines, log } = captureLog('info');
  const app = await startApp(t, { log, worker: false, env: dev ? { JWT_SECRET: undefined } : {} });
  await app.db.sql.unsafe(SETUP);
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  const cases = {
    patchWithoutFilter: await app.call('PATCH', '/rest/v1/todo_errs', { apikey: app.anonKey, body: { title: 'x' } }),
    wrongType: await app.call('GET', '/rest/v1/todo_errs?id=eq.abc', { apikey: app.anonKey }),
    notNull: await app.call('POST', '/rest/v1/todo_errs', { apikey: app.anonKey, body: { id: 1 } }),
    check: await app.call('POST', '/rest/v1/todo_errs', { apikey: app.anonKey, body: { id: 2, title: 't', n: 0 } }),
    noTable: await app.call('GET', '/rest/v1/todo_nowhere', { apikey: app.anonKey }),
  };
  const lineOf = (r: { headers: Headers }) => lines.find((l) => l.request_id === r.headers.get('x-request-id') && typeof l.status === 'number' && l.status >= 400);
  return { cases, lineOf };
}

t.test('development mode: the reason in words', async (t) => {
  const { cases, lineOf } = await refusals(t, true);
  for (const [name, r] of Object.entries(cases)) {
    if (name === 'noTable') continue;
    t.equal(r.status, 400, `${name}: 400`);
    t.same(r.body, { error: 'invalid request' }, `${name}: the interface's message`);
  }
  t.same([cases.noTable.status, cases.noTable.body], [404, { error: 'relation not found' }], 'an unknown table: 404 as ever');
  t.match(lineOf(cases.noTable), { reason: /no table or view public\.todo_nowhere/ }, 'which table');
  t.match(lineOf(cases.patchWithoutFilter), { reason: /PATCH needs a filter/ }, 'a PATCH without a filter');
  t.match(lineOf(cases.wrongType), { reason: /PostgreSQL: invalid input syntax for type integer: "abc"/ }, 'a wrong type');
  t.match(lineOf(cases.notNull), { reason: /PostgreSQL: null value in column "title"/, column: 'title' }, 'a NOT NULL, with its column');
  t.match(lineOf(cases.check), { reason: /violates check constraint/, constraint: 'todo_errs_n_check' }, 'a check, with its constraint');
  for (const r of Object.values(cases)) t.ok(lineOf(r)?.request_id, 'next to the request id');
});

t.test('production: no database text in the line', async (t) => {
  const { cases, lineOf } = await refusals(t, false);
  t.equal(cases.notNull.status, 400);
  const line = lineOf(cases.notNull);
  t.ok(line, 'the refusal is logged');
  t.notOk(JSON.stringify(line).includes('null value'), "PostgreSQL's message stays out of the production log");
  t.match(lineOf(cases.patchWithoutFilter), { reason: /PATCH needs a filter/ }, "plinth's own reason (no request data) is kept");
});
