/**
 * `storage-render-load`: do sign-ins and REST keep their speed while renders are hammered?
 *
 * Password sign-ins (argon2id, on libuv's pool, which sharp's pipelines share), then REST
 * GETs by key, from 4 clients each, in windows that alternate: alone, then while 8 more
 * clients ask for fresh renders without pause (a new size every time, so nothing comes from
 * the variant cache; a 503 is retried at once, as an attacker would). The sources are the
 * costliest the defaults accept: PNGs of 24 megapixels that are a few kilobytes of bytes.
 * The figure is the lower of the two ratios (rate while rendering / rate alone); goal ≥ 0.7.
 *
 * It runs against the bench's service (its defaults: IMAGE_RENDER_CONCURRENCY=1, the
 * database back end), with users and a public bucket of its own.
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import sharp from 'sharp';
import type { CustomScenario, RunContext, RunResult } from './scenarios.ts';

const SIGNIN_CLIENTS = 4;
const REST_CLIENTS = 4;
const RENDER_CLIENTS = 8;
const SOURCES = 8;
const PASSWORD = 'render-bench-password-0123';

interface Reply {
  status: number;
  body: string;
}

function request(agent: http.Agent, base: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Reply> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Run `n` loops of `one` until `stop()`; counts the 2xx answers. */
async function loops(n: number, stop: () => boolean, one: (i: number) => Promise<number>): Promise<{ ok: number; other: Map<number, number> }> {
  const out = { ok: 0, other: new Map<number, number>() };
  await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      while (!stop()) {
        const status = await one(i);
        if (status >= 200 && status < 300) out.ok++;
        else out.other.set(status, (out.other.get(status) ?? 0) + 1);
      }
    }),
  );
  return out;
}

export async function runRenderLoad(ctx: RunContext): Promise<RunResult> {
  const base = ctx.serviceUrl;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const anon = { apikey: ctx.anonKey, authorization: `Bearer ${ctx.anonKey}` };
  const svc = { apikey: ctx.anonKey, authorization: `Bearer ${ctx.serviceRoleKey}` };
  const json = { 'content-type': 'application/json' };
  try {
    // Accounts to sign in with.
    const run = randomUUID().slice(0, 8);
    const users = Array.from({ length: SIGNIN_CLIENTS }, (_, i) => ({ email: `render-${run}-${i}@example.com`, password: PASSWORD }));
    for (const u of users) {
      const r = await request(agent, base, 'POST', '/auth/v1/signup', { ...json, apikey: ctx.anonKey }, JSON.stringify(u));
      if (r.status < 200 || r.status > 299) throw new Error(`signup: ${r.status} ${r.body.slice(0, 100)}`);
    }
    // A public bucket of 24 MP sources, a few KB each.
    const bucket = `render-${run}`;
    const made = await request(agent, base, 'POST', '/storage/v1/bucket', { ...json, ...svc }, JSON.stringify({ id: bucket, public: true }));
    if (made.status !== 201) throw new Error(`bucket: ${made.status} ${made.body.slice(0, 100)}`);
    const png = await sharp({ create: { width: 6000, height: 4000, channels: 3, background: { r: 90, g: 160, b: 60 } } }).png().toBuffer();
    for (let i = 0; i < SOURCES; i++) {
      const up = await fetch(`${base}/storage/v1/object/${bucket}/s${i}.png`, { method: 'POST', headers: { ...svc, 'content-type': 'image/png' }, body: new Uint8Array(png) });
      if (up.status !== 200) throw new Error(`upload: ${up.status} ${await up.text()}`);
    }

    const signIn = (i: number) =>
      request(agent, base, 'POST', '/auth/v1/token', { ...json, apikey: ctx.anonKey }, JSON.stringify({ grant_type: 'password', ...users[i % users.length] })).then((r) => r.status);
    let item = 0;
    const restGet = () => request(agent, base, 'GET', `/rest/v1/bench_items?id=eq.${(item++ % 9) + 1}`, anon).then((r) => r.status);
    let fresh = 0;
    const render = () => {
      const n = fresh++;
      // 30 sizes per source (under the cap of 32 variants), then the next source.
      const path = `/storage/v1/render/image/public/${bucket}/s${Math.floor(n / 30) % SOURCES}.png?width=${100 + (n % 30)}&format=webp`;
      return request(agent, base, 'GET', path, {}).then((r) => r.status);
    };
    const first = await render();
    if (first !== 200) throw new Error(`first render: ${first}`);

    const windowMs = ctx.quick ? 1500 : 5000;
    const rounds = ctx.quick ? 2 : 4;
    /** One window of sign-ins, then one of REST GETs: each rate without the other in its way. */
    const measure = async () => {
      const window = async (n: number, one: (i: number) => Promise<number>) => {
        const end = performance.now() + windowMs;
        const r = await loops(n, () => performance.now() >= end, one);
        return { rate: r.ok / (windowMs / 1000), errors: r.other.size };
      };
      const s = await window(SIGNIN_CLIENTS, signIn);
      const r = await window(REST_CLIENTS, restGet);
      return { signin: s.rate, rest: r.rate, errors: s.errors + r.errors };
    };
    // Warm-up, then alone / while rendering, alternately.
    await measure();
    const alone = { signin: 0, rest: 0 };
    const loaded = { signin: 0, rest: 0 };
    const renders = { ok: 0, other: new Map<number, number>() };
    let errors = 0;
    for (let k = 0; k < rounds; k++) {
      const a = await measure();
      alone.signin += a.signin / rounds;
      alone.rest += a.rest / rounds;
      let rendering = true;
      const hammer = loops(RENDER_CLIENTS, () => !rendering, render);
      await new Promise((r) => setTimeout(r, 300)); // the renders under way before the window opens
      const b = await measure();
      rendering = false;
      const h = await hammer;
      renders.ok += h.ok;
      for (const [st, c] of h.other) renders.other.set(st, (renders.other.get(st) ?? 0) + c);
      loaded.signin += b.signin / rounds;
      loaded.rest += b.rest / rounds;
      errors += a.errors + b.errors;
    }
    const ratio = Math.min(loaded.signin / alone.signin, loaded.rest / alone.rest);
    const refused = [...renders.other].map(([st, c]) => `${c}×${st}`).join(', ') || 'none';
    return {
      rps: loaded.signin,
      baseline_rps: alone.signin,
      ratio: Math.round(ratio * 100) / 100,
      status: errors > 0 ? 'ERROR' : undefined,
      note:
        `sign-in ${loaded.signin.toFixed(1)}/s vs ${alone.signin.toFixed(1)}/s alone (${(loaded.signin / alone.signin).toFixed(2)}), ` +
        `REST GET ${loaded.rest.toFixed(0)}/s vs ${alone.rest.toFixed(0)}/s (${(loaded.rest / alone.rest).toFixed(2)}); ` +
        `${renders.ok} fresh 24 MP renders by ${RENDER_CLIENTS} clients, refused: ${refused}`,
      extra: {
        signin_alone_rps: alone.signin,
        signin_loaded_rps: loaded.signin,
        rest_alone_rps: alone.rest,
        rest_loaded_rps: loaded.rest,
        renders: renders.ok,
        renders_refused: Object.fromEntries(renders.other),
      },
    };
  } finally {
    agent.destroy();
  }
}

export const RENDER_LOAD_SCENARIOS: CustomScenario[] = [
  {
    name: 'storage-render-load',
    what: 'password sign-in and REST GET while 8 clients ask for fresh 24 MP renders',
    target: { kind: 'ratio', min: 0.7 },
    baselineLabel: 'the same sign-ins and GETs without the renders (the lower ratio)',
    run: (c) => runRenderLoad(c),
  },
];
