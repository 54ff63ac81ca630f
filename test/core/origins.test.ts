/**
 * Which origins may call: in development mode any local origin (an app on another port works
 * with no setting), in production SITE_URL's origin and ALLOWED_ORIGINS, for REST and
 * WebSockets alike; a refused origin is logged once, with the setting that would allow it.
 */
import t from 'tap';
import WebSocket from 'ws';
import { captureLog } from '../helpers/log-capture.ts';
import { startApp, type TestApp } from '../helpers/app.ts';


async function preflight(app: TestApp, origin: string): Promise<string | null> {
  const r = await app.fetch('/rest/v1/todos', { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST' } });
  return r.headers.get('access-control-allow-origin');
}

/** The status of a WebSocket upgrade from `origin`: 101 or the refusal's. */
function upgrade(app: TestApp, origin: string): Promise<number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`${app.url.replace('http', 'ws')}/ws/todos_live?apikey=${app.anonKey}`, { origin });
    ws.on('upgrade', () => {
      resolve(101);
      ws.close();
    });
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
    });
    ws.on('error', () => {});
  });
}

async function fixtures(app: TestApp) {
  await app.db.sql.unsafe(`create table if not exists public.todos (id int); select live.subscribe('todos_live', 'select id from todos');`).simple();
}

t.test('development mode: any local origin, REST and WebSockets', async (t) => {
  const app = await startApp(t, { worker: false, env: { JWT_SECRET: undefined, SITE_URL: undefined } });
  await fixtures(app);
  for (const o of ['http://localhost:5173', 'http://127.0.0.1:3001']) {
    t.equal(await preflight(app, o), o, `REST allows ${o}`);
    t.equal(await upgrade(app, o), 101, `WebSockets allow ${o}`);
  }
  t.equal(await preflight(app, 'https://evil.example.com'), null, 'a foreign origin is still refused');
  t.equal(await upgrade(app, 'https://evil.example.com'), 403);
});

t.test('production: refused until SITE_URL names the app, then REST and WebSockets work; one log line per origin', async (t) => {
  const { lines, log } = captureLog();
  const app = await startApp(t, { worker: false, log, env: { SITE_URL: 'https://app.example.com' } });
  await fixtures(app);
  const page = 'http://localhost:5173';
  t.equal(await preflight(app, page), null, 'REST refuses a local origin in production');
  t.equal(await upgrade(app, page), 403, 'WebSockets too');
  await preflight(app, page);
  const logged = lines.filter((l) => l.origin === page);
  t.equal(logged.length, 1, 'one line per origin, not one per request');
  t.match(String(logged[0]?.msg), /add it to ALLOWED_ORIGINS .* or set SITE_URL to it/, 'naming the setting that would allow it');

  const named = await startApp(t, { worker: false, db: app.db, env: { SITE_URL: page } });
  t.equal(await preflight(named, page), page, 'SITE_URL names it: REST allows it');
  t.equal(await upgrade(named, page), 101, 'and WebSockets');
  const listed = await startApp(t, { worker: false, db: app.db, env: { ALLOWED_ORIGINS: page } });
  t.equal(await upgrade(listed, page), 101, 'ALLOWED_ORIGINS works the same way');
});
