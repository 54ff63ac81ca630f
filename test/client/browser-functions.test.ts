/// <reference lib="dom" />
/**
 * `functions.invoke` in a real browser (issue 16 §7, interface §4.7, contract §6): a
 * database function registered in `edge.functions` as `plv8` (any language runs there)
 * is called with a JSON body as the page's user. Skipped (with the reason) only while the
 * functions area is not part of this build: 404 `not found` on its route.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { PASSWORD, uniqueEmail } from '../auth/helpers.ts';
import { chromiumMissing, launch, openPage, startPages } from './browser.ts';

type W = any;

const missing = chromiumMissing();
if (missing) {
  t.plan(0, missing);
} else {
  await run();
}

async function run() {
  const [site] = await startPages(t, 1);
  // plv8-runtime functions only: no bundled Deno runtime (FUNCTIONS_DIR absent).
  const app = await startApp(t, { worker: false, env: { SITE_URL: site.origin, AUTH_RATE_LIMIT: '0', FUNCTIONS_DIR: '/nonexistent/plinth-functions' } });
  await app.db.sql
    .unsafe(
      `create function public.echo(payload jsonb) returns jsonb language sql stable
         as $$ select jsonb_build_object('got', payload, 'role', auth.role(), 'uid', auth.uid()) $$;
       grant execute on function public.echo(jsonb) to anon, anonymous, authenticated;
       insert into edge.functions (name, runtime) values ('echo', 'plv8');`,
    )
    .simple();
  const reload = await app.call('POST', '/functions/v1/_refresh', { token: app.serviceKey });
  if (reload.status !== 200) throw new Error(`functions catalog refresh: ${reload.status} ${reload.text}`);
  site.app = { url: app.url, anonKey: app.anonKey };
  const ctx = await launch(t);

  await t.test('invoke with a JSON body, as anon and as the signed-in user', async (t) => {
    const page = await openPage(ctx, site.origin);
    const r = await page.evaluate(
      async ({ email, password }) => {
        const c = (window as W).client;
        const anon = await c.functions.invoke('echo', { body: { hello: 'world' } });
        const { data } = await c.auth.signUp({ email, password });
        const user = await c.functions.invoke('echo', { body: { n: 1 }, headers: { 'x-client-info': 'test' } });
        const missing = await c.functions.invoke('nope', { body: {} });
        return {
          anon: anon.data,
          anonError: anon.error,
          user: user.data,
          uid: data.user.id,
          missing: missing.error && { status: missing.error.status, message: missing.error.message },
        };
      },
      { email: uniqueEmail('fn'), password: PASSWORD },
    );
    t.equal(r.anonError, null);
    t.same(r.anon, { got: { hello: 'world' }, role: 'anon', uid: null });
    t.same(r.user, { got: { n: 1 }, role: 'authenticated', uid: r.uid }, 'the session token reached the function');
    t.same(r.missing, { status: 404, message: 'function not found' });
    await page.close();
  });
}
