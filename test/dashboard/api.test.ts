/**
 * The dashboard's service side: its page under a strict CSP, the one-time setup link that
 * creates the first admin, and the service-role endpoints only the dashboard needed
 * (GET /api/tables, /api/live, /api/settings); DASHBOARD_ENABLED=false removes all of it.
 */
import t from 'tap';
import { startApp, TEST_JWT_SECRET } from '../helpers/app.ts';
import { setupToken } from '../../src/dashboard/index.ts';
import { buildAssets, sizes } from '../../src/dashboard/assets.ts';
import { PASSWORD, uniqueEmail } from '../auth/helpers.ts';

const app = await startApp(t, { worker: false, env: { AUTH_RATE_LIMIT: '0' } });
await app.db.sql
  .unsafe(
    `create table public.notes (id int primary key, title text not null default 'untitled', owner uuid);
     alter table public.notes enable row level security;
     create policy notes_own on public.notes for select to authenticated using (owner = auth.uid());
     grant select on public.notes to authenticated;
     create view public.note_titles as select title from public.notes;
     select live.subscribe('all_notes', 'select id, title from public.notes');`,
  )
  .simple();

t.test('the page: CSP, no framing, its code and styles, 304 on a match', async (t) => {
  const page = await app.fetch('/_/');
  t.equal(page.status, 200);
  t.match(page.headers.get('content-type'), /^text\/html/);
  const csp = page.headers.get('content-security-policy') ?? '';
  t.match(csp, /default-src 'self'/);
  t.match(csp, /script-src 'self'(;|$)/, 'no inline script');
  t.match(csp, /style-src 'self'(;|$)/, 'no inline style');
  t.equal(page.headers.get('x-frame-options'), 'DENY');
  const html = await page.text();
  t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'every script is a file');
  t.notMatch(html, /<style|style=/, 'no inline style');
  for (const file of ['app.js', 'app.css']) {
    const r = await app.fetch(`/_/${file}`);
    t.equal(r.status, 200, file);
    t.ok((await r.arrayBuffer()).byteLength > 100, `${file} has content`);
    const again = await app.fetch(`/_/${file}`, { headers: { 'if-none-match': r.headers.get('etag')! } });
    t.equal(again.status, 304);
  }
  const bare = await app.fetch('/_', { redirect: 'manual' });
  t.equal(bare.status, 308);
  t.equal(bare.headers.get('location'), '/_/');
});

t.test('the setup link creates the first admin once; an admin can then sign in', async (t) => {
  const token = await setupToken(app.service.db);
  t.type(token, 'string');
  t.equal(await setupToken(app.service.db), token, 'the same link while unused (shown again on the next start)');
  const bad = await app.call('POST', '/api/dashboard/setup', { body: { token: 'nope', email: uniqueEmail('x'), password: PASSWORD } });
  t.same([bad.status, bad.body], [400, { error: 'invalid or expired setup link' }]);
  const shape = await app.call('POST', '/api/dashboard/setup', { body: { token } });
  t.same([shape.status, shape.body], [400, { error: 'invalid request body' }]);
  const short = await app.call('POST', '/api/dashboard/setup', { body: { token, email: uniqueEmail('x'), password: 'short' } });
  t.same([short.status, short.body], [400, { error: 'password must be at least 8 characters' }]);
  const email = uniqueEmail('admin');
  const made = await app.call('POST', '/api/dashboard/setup', { body: { token, email, password: PASSWORD } });
  t.equal(made.status, 201);
  t.equal(made.body.role, 'service_role');
  const reused = await app.call('POST', '/api/dashboard/setup', { body: { token, email: uniqueEmail('y'), password: PASSWORD } });
  t.same([reused.status, reused.body], [400, { error: 'invalid or expired setup link' }], 'single use');
  t.equal(await setupToken(app.service.db), null, 'no link once an admin exists');
  const session = await app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email, password: PASSWORD } });
  t.equal(session.status, 200);
  const tables = await app.call('GET', '/api/tables', { token: session.body.access_token });
  t.equal(tables.status, 200, "the admin account's token opens the dashboard's endpoints");
});

t.test('GET /api/tables: columns, keys, RLS, policies and grants per API role', async (t) => {
  const r = await app.call('GET', '/api/tables', { token: app.serviceKey });
  t.equal(r.status, 200);
  const notes = r.body.find((x: { name: string }) => x.name === 'notes');
  t.equal(notes.kind, 'table');
  t.equal(notes.rls, true);
  t.same(
    notes.columns.map((c: { name: string; primary_key: boolean }) => [c.name, c.primary_key]),
    [
      ['id', true],
      ['title', false],
      ['owner', false],
    ],
  );
  t.equal(notes.columns[1].default, "'untitled'::text");
  t.same(notes.policies, [{ name: 'notes_own', command: 'select', permissive: true, roles: ['authenticated'], using: '(owner = auth.uid())', with_check: null }]);
  t.same(notes.grants.authenticated, ['select']);
  t.same(notes.grants.anon, []);
  t.same(notes.grants.service_role, ['select', 'insert', 'update', 'delete'], 'the service role by default');
  t.equal(r.body.find((x: { name: string }) => x.name === 'note_titles').kind, 'view');
});

t.test('GET /api/live and /api/settings: the registry, and the configuration without a secret', async (t) => {
  const live = await app.call('GET', '/api/live', { token: app.serviceKey });
  t.equal(live.status, 200);
  t.same(live.body.queries.map((q: { query_id: string }) => q.query_id), ['all_notes']);
  t.same(live.body.presence, []);
  t.same(live.body.sockets, {});
  const s = await app.call('GET', '/api/settings', { token: app.serviceKey });
  t.equal(s.status, 200);
  t.equal(s.body.version, '0.1.0');
  t.equal(s.body.features.dashboard, true);
  t.equal(s.body.features.sql_endpoint, false);
  t.ok(s.body.migrations.plinth.length > 10, "plinth's applied migrations");
  for (const secret of [TEST_JWT_SECRET, app.serviceKey, app.db.url]) t.notOk(s.text.includes(secret), 'no secret in the settings');
});

t.test('service role only', async (t) => {
  const user = await app.call('POST', '/auth/v1/signup', { body: { email: uniqueEmail('u'), password: PASSWORD } });
  for (const path of ['/api/tables', '/api/live', '/api/settings']) {
    const none = await app.call('GET', path);
    t.same([none.status, none.body], [401, { error: 'missing credentials' }], path);
    for (const token of [app.anonKey, user.body.access_token]) {
      const r = await app.call('GET', path, { token });
      t.same([r.status, r.body], [403, { error: 'service role required' }], path);
    }
  }
});

t.test('DASHBOARD_ENABLED=false: no page, no endpoints', async (t) => {
  const off = await startApp(t, { worker: false, env: { DASHBOARD_ENABLED: 'false' } });
  for (const path of ['/_/', '/_/app.js', '/api/tables', '/api/settings', '/api/live']) {
    const r = await off.call('GET', path, { token: off.serviceKey });
    t.equal(r.status, 404, path);
  }
  const setup = await off.call('POST', '/api/dashboard/setup', { body: {} });
  t.equal(setup.status, 404);
});

t.test('the gzipped files stay within the 150 kB budget', async (t) => {
  const total = sizes(await buildAssets()).at(-1)!;
  t.equal(total.file, 'total');
  t.ok(total.gzip > 5_000 && total.gzip <= 150 * 1024, `${total.gzip} bytes gzipped`);
});
