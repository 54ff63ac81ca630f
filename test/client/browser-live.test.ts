/// <reference lib="dom" />
/**
 * `client.live()` in a real browser (issue 16 §7, interface §4.9, §6.2, contract §5): a
 * live query's deltas arrive in the page and are applied to its rows; a missed delta (a
 * `seq` gap, made by dropping one frame in the page) is healed by the service's snapshot;
 * broadcast and presence between two tabs. Skipped (with the reason) only while the live
 * area is not part of this build: 404 `not found` on its route.
 */
import t from 'tap';
import type { Page } from 'playwright-core';
import { startApp } from '../helpers/app.ts';
import { chromiumMissing, launch, openPage, startPages, until } from './browser.ts';

type W = any;

const titles = (page: Page) => page.evaluate(() => (window as W).q.rows.map((r: any) => r.title).sort());

const missing = chromiumMissing();
if (missing) {
  t.plan(0, missing);
} else {
  await run();
}

/** In the page: a WebSocket that drops the next delta frame when `window.dropNext` is set. */
async function installLive(page: Page, queryId: string): Promise<void> {
  await page.evaluate((queryId) => {
    const w = window as W;
    w.dropped = [];
    w.dropNext = false;
    class DroppingWebSocket {
      ws: WebSocket;
      onopen: ((e: unknown) => void) | null = null;
      onmessage: ((e: { data: unknown }) => void) | null = null;
      onclose: ((e: unknown) => void) | null = null;
      onerror: ((e: unknown) => void) | null = null;
      constructor(url: string, protocols?: string | string[]) {
        w.socketUrls = [...(w.socketUrls ?? []), url];
        this.ws = new WebSocket(url, protocols);
        this.ws.addEventListener('open', () => (w.socketProtocols = [...(w.socketProtocols ?? []), this.ws.protocol]));
        this.ws.onopen = (e) => this.onopen?.(e);
        this.ws.onclose = (e) => this.onclose?.(e);
        this.ws.onerror = (e) => this.onerror?.(e);
        this.ws.onmessage = (e) => {
          const m = JSON.parse(String(e.data));
          if (w.dropNext && m.type === undefined && typeof m.seq === 'number') {
            w.dropNext = false;
            w.dropped.push(m.seq);
            return;
          }
          this.onmessage?.(e);
        };
      }
      get readyState() {
        return this.ws.readyState;
      }
      send(d: string) {
        this.ws.send(d);
      }
      close(code?: number, reason?: string) {
        this.ws.close(code, reason);
      }
    }
    const c = w.client;
    w.broadcasts = [];
    w.presences = [];
    w.q = c.live(queryId, {
      WebSocket: DroppingWebSocket,
      refetch: () => c.from('items').select('id,title').order('id'),
    });
    w.q.on('broadcast', (payload: unknown, from: string) => w.broadcasts.push({ payload, from }));
    w.q.on('presence', (p: unknown) => w.presences.push(p));
  }, queryId);
}

async function run() {
  const [site] = await startPages(t, 1);
  // The WebSocket Origin check reads ALLOWED_ORIGINS (interface §4.9 rule 2).
  const app = await startApp(t, { env: { SITE_URL: site.origin, ALLOWED_ORIGINS: site.origin, AUTH_RATE_LIMIT: '0' } });
  const sql = app.db.sql;
  await sql
    .unsafe(
      `create table public.items (id int primary key, title text not null);
       grant select on public.items to anon, anonymous, authenticated;
       insert into public.items values (1, 'first');
       select live.subscribe('items_live', 'select id, title from public.items', 'delta');`,
    )
    .simple();
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  site.app = { url: app.url, anonKey: app.anonKey };
  const ctx = await launch(t);

  await t.test('deltas arrive in the page; a seq gap is healed by a snapshot', async (t) => {
    const page = await openPage(ctx, site.origin);
    await installLive(page, 'items_live');
    await until(page, () => (window as W).q.status === 'subscribed' && (window as W).q.snapshots === 1 && (window as W).q.rows.length === 1);
    t.same(await titles(page), ['first'], "initial rows from the service's snapshot");
    t.match(await page.evaluate(() => (window as W).socketUrls[0]), /\/ws\/items_live$/, 'the URL carries no token');
    t.same(await page.evaluate(() => (window as W).socketProtocols), ['plinth'], 'the browser sent it in Sec-WebSocket-Protocol; the server chose plinth');

    await sql`insert into public.items values (2, 'second')`;
    await until(page, () => (window as W).q.rows.length === 2);
    t.same(await titles(page), ['first', 'second'], 'a delta was applied');
    t.equal(await page.evaluate(() => (window as W).q.snapshots), 1, 'without loading again');

    await sql`update public.items set title = 'second, edited' where id = 2`;
    await until(page, () => (window as W).q.rows.some((r: any) => r.title === 'second, edited'));
    t.same(await titles(page), ['first', 'second, edited'], 'an update: old row out, new row in');

    await page.evaluate(() => ((window as W).dropNext = true));
    await sql`insert into public.items values (3, 'third (its delta is lost)')`;
    await until(page, () => (window as W).dropped.length === 1);
    t.same(await titles(page), ['first', 'second, edited'], 'the dropped delta is missing');
    await sql`insert into public.items values (4, 'fourth')`;
    await until(page, () => (window as W).q.rows.length === 4);
    t.same(await titles(page), ['first', 'fourth', 'second, edited', 'third (its delta is lost)'], 'the gap was healed');
    t.equal(await page.evaluate(() => (window as W).q.snapshots), 2, 'by one snapshot');
    t.equal(await page.evaluate(() => (window as W).q.refetches), 0, 'never a refetch over REST');
    await sql`delete from public.items where id = 1`;
    await until(page, () => (window as W).q.rows.length === 3);
    t.notOk((await titles(page)).includes('first'), 'a delete');
    await page.evaluate(() => (window as W).q.close());
    await page.close();
  });

  await t.test('broadcast and presence between two tabs', async (t) => {
    const a = await openPage(ctx, site.origin);
    const b = await openPage(ctx, site.origin);
    await installLive(a, 'items_live');
    await installLive(b, 'items_live');
    await until(a, () => (window as W).q.status === 'subscribed');
    await until(b, () => (window as W).q.status === 'subscribed');
    const aId = await a.evaluate(() => (window as W).q.clientId);
    const bId = await b.evaluate(() => (window as W).q.clientId);
    t.ok(aId && bId && aId !== bId);

    t.equal(await a.evaluate(() => (window as W).q.track({ name: 'ada' })), true);
    const seen = await until(b, () => Object.values((window as W).q.presence).find((s: any) => s.name === 'ada'));
    t.same(seen, { name: 'ada' });
    t.same(await b.evaluate((id) => (window as W).q.presence[id], aId), { name: 'ada' }, 'keyed by the client id');

    t.equal(await a.evaluate(() => (window as W).q.broadcast({ hello: 'tab b' })), true);
    const got = await until(b, () => (window as W).broadcasts[0]);
    t.same(got, { payload: { hello: 'tab b' }, from: aId }, 'from is the sender');
    await until(a, () => (window as W).broadcasts.length === 1);

    await b.evaluate((id) => ((window as W).aId = id), aId);
    await a.evaluate(() => (window as W).q.close());
    await until(b, () => (window as W).q.presence[(window as W).aId] === undefined);
    t.pass('presence_leave removed the closed tab');
    await a.close();
    await b.close();
  });
}
