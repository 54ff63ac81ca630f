/**
 * `npm run scale:ten`: ten instances at DB_POOL_SIZE=6 on one PostgreSQL with the default
 * max_connections (100), under load. A private embedded PostgreSQL (its own initdb, in a
 * temporary folder, on a free port) so that the count is this run's alone; ten services in
 * this process, each with its worker; mixed requests of every API role on all ten at once
 * while pg_stat_activity is sampled. Prints max_connections, the peak of connections held by
 * the ten, and every status; exits 1 if a request failed or the peak went past
 * 10 × (6 + 2).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { SignJWT } from 'jose';
import { parseConfig, resolveSecrets } from '../src/core/config.ts';
import { startEmbedded } from '../src/host/embedded.ts';
import { createLogger } from '../src/core/log.ts';
import { applyPlinthCurrent, runAllMigrations } from '../src/host/migrate.ts';
import { startService, type Service } from '../src/service.ts';

const INSTANCES = Number(process.env.INSTANCES ?? 10);
const POOL = Number(process.env.POOL ?? 6);
const REQUESTS = Number(process.env.REQUESTS ?? 3000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 100);
const SECRET = 'scale-ten-secret-scale-ten-secret-0123456789';

const log = createLogger('warn');
const root = mkdtempSync(join(tmpdir(), 'plinth-scale-'));
chmodSync(root, 0o711);
const embedded = await startEmbedded(join(root, 'pg'), log);
const services: Service[] = [];
let failed: boolean;
try {
  await runAllMigrations(embedded.url, 'anonymous', log, { secret: SECRET });
  await applyPlinthCurrent(embedded.url, 'anonymous');
  const admin = postgres(embedded.url, { max: 1, onnotice: () => {} });
  await admin.unsafe(`
    create table if not exists public.scaled (id int primary key, v text);
    insert into public.scaled select g, 'v' || g from generate_series(1, 50) g on conflict do nothing;
    create table if not exists public.scaled_log (id bigint generated always as identity primary key, n int);
    grant select on public.scaled to anon, authenticated, service_role;
    grant select, insert on public.scaled_log to authenticated, service_role;
  `);
  const [{ max_connections }] = await admin<{ max_connections: string }[]>`select current_setting('max_connections') as max_connections`;

  for (let i = 0; i < INSTANCES; i++) {
    const config = await resolveSecrets(
      parseConfig({ JWT_SECRET: SECRET, HOST: '127.0.0.1', PORT: '0', DATA_DIR: join(root, `i${i}`), DB_POOL_SIZE: String(POOL), LOG_LEVEL: 'warn' }),
    );
    services.push(await startService(config, log, { databaseUrl: embedded.url, workerConcurrency: 4 }));
  }
  const anonKey = services[0].deps.config.anonKey;
  const serviceKey = services[0].deps.config.serviceRoleKey;
  const now = Math.floor(Date.now() / 1000);
  const user = await new SignJWT({ role: 'authenticated', aud: 'authenticated' })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('00000000-0000-4000-8000-0000000000e1')
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(new TextEncoder().encode(SECRET));
  await fetch(services[0].url + '/api/catalog/refresh', { method: 'POST', headers: { authorization: `Bearer ${serviceKey}` } });

  const count = async () => {
    const [r] = await admin<{ n: number; all: number }[]>`
      select count(*) filter (where application_name like 'plinth%')::int as n, count(*) filter (where backend_type = 'client backend')::int as all
        from pg_stat_activity`;
    return r;
  };
  let peak = 0;
  let peakAll = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const c = await count();
      peak = Math.max(peak, c.n);
      peakAll = Math.max(peakAll, c.all);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const statuses = new Map<number, number>();
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < REQUESTS) {
        const i = next++;
        const base = services[i % services.length].url;
        const kind = i % 3;
        const res =
          kind === 0
            ? await fetch(`${base}/rest/v1/scaled?select=id,v&id=lt.20`, { headers: { apikey: anonKey } })
            : kind === 1
              ? await fetch(`${base}/rest/v1/scaled?select=id&id=eq.${i % 50}`, { headers: { apikey: anonKey, authorization: `Bearer ${user}` } })
              : await fetch(`${base}/rest/v1/scaled_log`, {
                  method: 'POST',
                  headers: { apikey: serviceKey, authorization: `Bearer ${serviceKey}`, 'content-type': 'application/json' },
                  body: JSON.stringify({ n: i }),
                });
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  sampling = false;
  await sampler;
  const idle = await count();
  await admin.end();
  const bad = [...statuses].filter(([s]) => s >= 300);
  failed = bad.length > 0 || peak > INSTANCES * (POOL + 2);
  process.stdout.write(
    `${INSTANCES} instances at DB_POOL_SIZE=${POOL}, max_connections=${max_connections}: ` +
      `${REQUESTS} requests (${CONCURRENCY} at once) in ${seconds.toFixed(1)} s, statuses ${JSON.stringify(Object.fromEntries(statuses))}; ` +
      `peak ${peak} connections of the instances (${peakAll} client backends in all), ${idle.n} right after\n`,
  );
} finally {
  for (const s of services) await s.close().catch(() => {});
  await embedded.stop();
  rmSync(root, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
