/**
 * Strict-Transport-Security: on every response when API_EXTERNAL_URL is https (a browser
 * that once reached the API then refuses plain http to it, so a network attacker cannot
 * downgrade it), and never on a plain-http deployment, where it would mean nothing.
 */
import t from 'tap';
import { connect } from 'node:net';
import { startApp, type TestApp } from '../helpers/app.ts';

const HSTS = 'max-age=31536000; includeSubDomains';

/** The head of the answer to a request Node's HTTP parser refuses (answered outside fastify). */
function rawRefusal(app: TestApp): Promise<string> {
  const { hostname, port } = new URL(app.url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), hostname, () => s.write('NOT A REQUEST\r\n\r\n'));
    let got = '';
    s.on('data', (d) => (got += d));
    s.on('end', () => resolve(got));
    s.on('error', reject);
  });
}

/** The Strict-Transport-Security header of a set of responses of every kind. */
async function seen(app: TestApp): Promise<Record<string, string | null>> {
  const out: Record<string, string | null> = {};
  const get = async (what: string, path: string, init?: RequestInit) => {
    const r = await app.fetch(path, init);
    await r.arrayBuffer();
    out[`${what} (answered ${r.status})`] = r.headers.get('strict-transport-security');
  };
  await get('200 /health', '/health');
  await get('404 unknown route', '/nowhere');
  await get('401 missing credentials', '/rest/v1/anything');
  await get('204 CORS preflight', '/rest/v1/anything', { method: 'OPTIONS' });
  await get('400 bad body', '/auth/v1/token?grant_type=password', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
  await get('400 bad URL', '/rest/v1/%E0%A4%A');
  await get('426 upgrade required', '/ws/anything', { headers: { apikey: app.anonKey } });
  const head = await rawRefusal(app);
  out[`400 refused by the HTTP parser (answered ${head.split(' ')[1]})`] = /^Strict-Transport-Security: (.*)\r$/im.exec(head)?.[1] ?? null;
  return out;
}

t.test('HSTS with an https API_EXTERNAL_URL, on every response', async (t) => {
  const app = await startApp(t, { worker: false, env: { API_EXTERNAL_URL: 'https://api.example.test' } });
  for (const [what, value] of Object.entries(await seen(app))) t.equal(value, HSTS, what);
});

t.test('no HSTS with an http API_EXTERNAL_URL', async (t) => {
  const app = await startApp(t, { worker: false, env: { API_EXTERNAL_URL: 'http://api.example.test' } });
  for (const [what, value] of Object.entries(await seen(app))) t.equal(value, null, what);
  const byDefault = await startApp(t, { worker: false, db: app.db });
  t.equal((await byDefault.fetch('/health')).headers.get('strict-transport-security'), null, 'nor with the default http://HOST:PORT');
});
