/**
 * The application's front end at `/` (PUBLIC_DIR), and the landing page without one.
 */
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startApp } from '../helpers/app.ts';

t.test('PUBLIC_DIR: files, types, caching, the SPA fallback, and the API untouched', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-public-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>my app</title>');
  writeFileSync(join(dir, 'app.js'), 'console.log(1)');
  writeFileSync(join(dir, 'style.css'), 'body{}');
  writeFileSync(join(dir, '.env'), 'SECRET=1');
  mkdirSync(join(dir, 'docs'));
  writeFileSync(join(dir, 'docs', 'index.html'), '<p>docs</p>');
  const app = await startApp(t, { worker: false, env: { PUBLIC_DIR: dir } });

  const home = await app.fetch('/');
  t.equal(home.status, 200);
  t.match(home.headers.get('content-type'), /^text\/html/);
  t.equal(await home.text(), '<!doctype html><title>my app</title>', '/ is index.html');
  const js = await app.fetch('/app.js');
  t.match(js.headers.get('content-type'), /^(text|application)\/javascript/);
  t.equal(js.headers.get('cache-control'), 'no-cache');
  t.equal(js.headers.get('x-content-type-options'), 'nosniff');
  const etag = js.headers.get('etag');
  t.ok(etag, 'an ETag');
  t.equal((await app.fetch('/app.js', { headers: { 'if-none-match': etag! } })).status, 304, 'unchanged: 304');
  t.match((await app.fetch('/style.css')).headers.get('content-type'), /^text\/css/);
  t.equal(await (await app.fetch('/docs/')).text(), '<p>docs</p>', "a folder's index.html");
  const head = await app.fetch('/app.js', { method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(head.headers.get('content-length'), '14');

  const page = await app.fetch('/todos/42', { headers: { accept: 'text/html,application/xhtml+xml' } });
  t.equal(page.status, 200, 'a page address falls back to index.html');
  t.equal(await page.text(), '<!doctype html><title>my app</title>');
  const missing = await app.call('GET', '/missing.js');
  t.same([missing.status, missing.body], [404, { error: 'not found' }], 'a missing file is not the page');
  for (const p of ['/.env', '/%2e%2e/package.json', '/docs/..%2f..%2fpackage.json', '/..%5c..%5cpackage.json']) {
    const r = await app.call('GET', p, { headers: { accept: 'text/html' } });
    t.not(r.status, 200, `${p} is refused`);
    t.notMatch(r.text, /SECRET|"name": "plinth"/, `${p} leaks nothing`);
  }
  const api = await app.call('GET', '/auth/v1/nope', { headers: { accept: 'text/html' } });
  t.same([api.status, api.body], [404, { error: 'not found' }], 'API paths keep their JSON 404');
  t.equal((await app.call('GET', '/health')).status, 200);
});

t.test('no PUBLIC_DIR: a landing page without secrets', async (t) => {
  const app = await startApp(t, { worker: false, env: { PUBLIC_DIR: undefined } });
  const r = await app.fetch('/');
  t.equal(r.status, 200);
  const html = await r.text();
  t.match(html, /href="\/health"/);
  t.match(html, /href="\/rest\/v1\/"/);
  t.notOk(html.includes(app.anonKey) || html.includes(app.serviceKey), 'no key on the page');
  t.notMatch(html, /eyJ/, 'no token of any kind');
  t.same((await app.call('GET', '/elsewhere')).body, { error: 'not found' });
});

t.test('PUBLIC_DIR naming no folder stops the start', async (t) => {
  const { parseConfig } = await import('../../src/core/config.ts');
  let message = '';
  try {
    parseConfig({ PUBLIC_DIR: '/nonexistent/plinth-public' });
  } catch (err) {
    message = (err as Error).message;
  }
  t.match(message, /PUBLIC_DIR \/nonexistent\/plinth-public is not a folder/);
});
