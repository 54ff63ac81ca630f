/**
 * Errors that point at the fix: the body keeps the interface's message, and the log line of
 * a refused request names the table or function, the role and the statement that would allow
 * it; an unknown column names the column; a constraint violation names the constraint.
 */
import t from 'tap';
import { captureLog } from '../helpers/log-capture.ts';
import { startApp } from '../helpers/app.ts';


t.test('a refused request logs what would allow it', async (t) => {
  const { lines, log } = captureLog();
  const app = await startApp(t, { worker: false, log });
  await app.db.sql.unsafe(`
    create table public.notes (id int primary key, body text, constraint body_short check (length(body) < 10));
    alter table public.notes enable row level security;
    create policy read_all on public.notes for select using (true);
    create function public.secret_fn() returns int language sql as 'select 1';
    revoke execute on function public.secret_fn() from public;
    grant select, insert on public.notes to service_role;
    grant select on public.notes to authenticated;`).simple();
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  const find = (pred: (l: Record<string, unknown>) => boolean) => lines.find(pred);

  const get = await app.call('GET', '/rest/v1/notes', { apikey: app.anonKey, token: app.anonKey });
  t.same([get.status, get.body], [403, { error: 'permission denied' }], 'the body keeps the interface message');
  const line = find((l) => l.status === 403 && l.method === 'GET');
  t.equal(line?.table, 'public.notes', 'the log names the table');
  t.equal(line?.role, 'anon', 'the role');
  t.equal(line?.fix, 'grant select on public.notes to anon;', 'and the GRANT that would allow it');

  await app.call('POST', '/rest/v1/notes', { token: app.anonKey, body: { id: 1, body: 'x' } });
  t.equal(find((l) => l.status === 403 && l.method === 'POST')?.fix, 'grant insert on public.notes to anon;', 'insert needs insert');

  await app.call('POST', '/rest/v1/rpc/secret_fn', { token: app.anonKey, body: {} });
  const fn = find((l) => l.status === 403 && typeof l.function === 'string');
  t.equal(fn?.fix, 'grant execute on function public.secret_fn to anon;', 'a function names EXECUTE');

  const col = await app.call('GET', '/rest/v1/notes?select=id,nope', { token: app.serviceKey });
  t.same([col.status, col.body], [400, { error: 'unknown column in request' }]);
  t.equal(find((l) => l.msg === 'unknown column in request')?.column, 'nope', 'an unknown column is named');

  await app.call('POST', '/rest/v1/notes', { token: app.serviceKey, body: { id: 2, body: 'ok' } });
  const dup = await app.call('POST', '/rest/v1/notes', { token: app.serviceKey, body: { id: 2, body: 'ok' } });
  t.equal(dup.status, 409);
  t.equal(find((l) => l.status === 409)?.constraint_name, 'notes_pkey', 'a unique violation names the constraint');
  const long = await app.call('POST', '/rest/v1/notes', { token: app.serviceKey, body: { id: 3, body: 'far too long a body' } });
  t.equal(long.status, 400);
  t.equal(find((l) => l.status === 400 && l.constraint_name === 'body_short')?.constraint_name, 'body_short', 'a check violation names the constraint');
});
