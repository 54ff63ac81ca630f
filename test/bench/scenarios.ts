/**
 * The seven scenarios of issue 6, each beside its baseline. A scenario says what it sends
 * to the service, what it sends to the baseline process (or that its baseline is the bare
 * argon2 rate), and its target.
 */
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import type { RequestSpec, Traffic } from './load.ts';
import { WEBHOOK_SCENARIOS } from './webhooks.ts';
import { JOB_SCENARIOS } from './jobs.ts';
import { FUNCTION_SCENARIOS } from './functions.ts';
import { LIVE_SCENARIOS } from './live.ts';
import { REALTIME_SCENARIOS } from './realtime.ts';
import { STORAGE_SCENARIOS } from './storage.ts';
import { STORAGE_EXTRA_SCENARIOS } from './storage-extra.ts';
import { RENDER_LOAD_SCENARIOS } from './render-load.ts';
import { OPS_SCENARIOS } from './ops.ts';
import { DB_LIMIT_SCENARIOS } from './db-limit.ts';
import { FUNCTIONS_PROXY_SCENARIOS } from './functions-proxy.ts';
import { IDLE_RSS_SCENARIOS } from './idle-rss.ts';
import { SLOW_NEIGHBOUR_SCENARIOS } from './slow-neighbours.ts';
import { WORKERS_SCENARIOS } from './workers.ts';

export type Target =
  | { kind: 'ratio'; min: number }
  | { kind: 'rps'; min: number }
  /** A figure that must stay at or under `max` (the scenario returns its own status). */
  | { kind: 'max'; max: number; unit: string }
  | { kind: 'none' };

export interface Env {
  anonKey: string;
  /** An access token of an `authenticated` user, minted with the service's JWT_SECRET. */
  userToken: string;
  users: { email: string; password: string }[];
  tokens: TokenPool;
  /** The bundled edge runtime's per-start secret (null without one). */
  edgeRuntimeSecret: string | null;
}

export interface Scenario {
  name: string;
  what: string;
  target: Target;
  /** What the baseline is, in a few words. */
  baselineLabel: string;
  /** Connections in flight at saturation (default: the run's). */
  connections?: number;
  service(env: Env): Traffic;
  /** Traffic to the baseline process; `'argon2'` = the bare argon2.verify rate. */
  baseline(env: Env): Traffic | 'argon2';
  /** Needs the auth area (sign-up users, refresh tokens). */
  needsAuth?: boolean;
  /** Where the baseline traffic goes: the baseline process (default), the service itself, or the bundled edge runtime. */
  baselineTarget?: 'baseline' | 'service' | 'edge-runtime';
}

/** What a scenario that drives its own measurement (`run`) is given. */
export interface RunContext {
  serviceUrl: string;
  serviceRoleKey: string;
  anonKey: string;
  /** The bench database, as its superuser. */
  dbUrl: string;
  quick: boolean;
  connections: number;
  /** An `authenticated` access token for the user `sub`, minted with the service's JWT_SECRET. */
  userToken(sub: string): Promise<string>;
  /** The service's bundled edge runtime (of `bench_hello`) and its per-start secret, or null. */
  edgeRuntimeUrl: string | null;
  edgeRuntimeSecret: string | null;
  /** The service's FUNCTIONS_DIR. */
  functionsDir: string;
  /** The service's JWT_SECRET (for a service process of the scenario's own). */
  jwtSecret: string;
  /** With --cpu-prof: where a process of the scenario's own writes its CPU profile (null: not profiled). */
  profileDir: string | null;
}

/** Its figures; the status follows from `target` as for the others. */
export interface RunResult {
  rps: number | null;
  baseline_rps?: number | null;
  ratio?: number | null;
  p50_ms?: number | null;
  p99_ms?: number | null;
  /** The scenario's own verdict where its target cannot say (e.g. ERROR when messages were lost). */
  status?: 'PASS' | 'MISS' | 'INFO' | 'ERROR';
  /** What the figure is compared with, when the scenario says it itself. */
  baseline?: string;
  rate_rps?: number;
  non2xx_share?: number;
  note?: string;
  /** The RSS figure, when the scenario ran processes of its own (storage). */
  rss_mb?: number | null;
  /** Further figures for the JSON output (storage: per back end). */
  extra?: Record<string, unknown>;
  /** The profiled process that is this scenario's baseline (with --cpu-prof): compared per request with the service at the end. */
  profiledBaseline?: { pid: number; requests: number };
}

/** A scenario that is not an HTTP load beside a baseline process (e.g. webhook deliveries). */
export interface CustomScenario {
  name: string;
  what: string;
  target: Target;
  baselineLabel: string;
  needsAuth?: undefined;
  run(ctx: RunContext): Promise<RunResult>;
}

/**
 * Unused refresh tokens: every request takes one; every 2xx session response gives the
 * rotated one back. Each token is sent exactly once.
 */
export class TokenPool {
  private readonly tokens: string[] = [];
  add(token: unknown): void {
    if (typeof token === 'string' && token !== '') this.tokens.push(token);
  }
  take(): string | null {
    return this.tokens.shift() ?? null;
  }
  get size(): number {
    return this.tokens.length;
  }
  /** An onResponse that keeps the refresh token of a 2xx session response. */
  readonly collect = (status: number, body: string): void => {
    if (status < 200 || status >= 300) return;
    try {
      this.add((JSON.parse(body) as { refresh_token?: unknown }).refresh_token);
    } catch {
      /* not a session */
    }
  };
}

export async function mintUserToken(secret: string, sub = randomUUID()): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ role: 'authenticated', aud: 'authenticated', email: 'bench@example.com', session_id: randomUUID(), is_anonymous: false })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(sub)
    .setIssuedAt(now)
    .setExpirationTime(now + 3600)
    .sign(new TextEncoder().encode(secret));
}

const JSON_HEADERS = { 'content-type': 'application/json' };

function anon(env: Env): Record<string, string> {
  return { apikey: env.anonKey, authorization: `Bearer ${env.anonKey}` };
}

/** Published item ids (every tenth seeded row is unpublished and hidden by RLS). */
const ITEM_IDS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17];
const AUTHOR_IDS = [1, 7, 19, 42, 77, 101, 150, 199];
const ITEM_BODY = JSON.stringify({ title: 'bench insert', body: 'lorem ipsum dolor sit amet' });

const health = (): Traffic => ({ requests: [{ method: 'GET', path: '/health' }] });

export const SCENARIOS: readonly (Scenario | CustomScenario)[] = [
  {
    name: 'rest-get-by-key',
    what: 'GET one row by primary key, anon key, RLS on',
    target: { kind: 'ratio', min: 0.6 },
    baselineLabel: 'bare fastify + postgres server (not a limit), same query, 1 round trip',
    service: (env) => ({
      requests: ITEM_IDS.map((id) => ({ method: 'GET', path: `/rest/v1/bench_items?id=eq.${id}`, headers: anon(env) })),
    }),
    baseline: (env) => ({
      requests: ITEM_IDS.map((id) => ({ method: 'GET', path: `/items?id=${id}`, headers: anon(env) })),
    }),
  },
  {
    name: 'rest-list-embed',
    what: 'GET 100 rows, filter + order + many-to-one embed',
    target: { kind: 'ratio', min: 0.6 },
    baselineLabel: 'bare fastify + postgres server (not a limit), same query, 1 round trip',
    service: (env) => ({
      requests: [
        {
          method: 'GET',
          path: '/rest/v1/bench_books?select=id,title,bench_authors(id,name)&author_id=lt.50&order=id&limit=100',
          headers: anon(env),
        },
      ],
    }),
    baseline: (env) => ({ requests: [{ method: 'GET', path: '/books?lt=50&limit=100', headers: anon(env) }] }),
  },
  {
    name: 'rest-insert',
    what: 'POST one row as an authenticated user, RLS on',
    target: { kind: 'ratio', min: 0.6 },
    baselineLabel: 'bare fastify + postgres server (not a limit), same insert, 1 round trip',
    service: (env) => ({
      requests: [
        {
          method: 'POST',
          path: '/rest/v1/bench_items',
          headers: { ...JSON_HEADERS, apikey: env.anonKey, authorization: `Bearer ${env.userToken}` },
          body: ITEM_BODY,
        },
      ],
    }),
    baseline: (env) => ({
      requests: [
        {
          method: 'POST',
          path: '/items',
          headers: { ...JSON_HEADERS, apikey: env.anonKey, authorization: `Bearer ${env.userToken}` },
          body: ITEM_BODY,
        },
      ],
    }),
  },
  {
    name: 'rpc-stable',
    what: 'POST /rest/v1/rpc of a STABLE SQL function, anon key',
    target: { kind: 'ratio', min: 0.6 },
    baselineLabel: 'bare fastify + postgres server (not a limit), same call, 1 round trip',
    service: (env) => ({
      requests: AUTHOR_IDS.map((id) => ({
        method: 'POST',
        path: '/rest/v1/rpc/bench_author_name',
        headers: { ...JSON_HEADERS, ...anon(env) },
        body: JSON.stringify({ p_id: id }),
      })),
    }),
    baseline: (env) => ({
      requests: AUTHOR_IDS.map((id) => ({
        method: 'POST',
        path: '/rpc/bench_author_name',
        headers: { ...JSON_HEADERS, ...anon(env) },
        body: JSON.stringify({ p_id: id }),
      })),
    }),
  },
  {
    name: 'token-refresh',
    what: 'POST /auth/v1/token refresh_token, a distinct unused token each',
    target: { kind: 'rps', min: 1500 },
    baselineLabel: 'bare server, select 1 (1-RTT reference)',
    needsAuth: true,
    service: (env) => ({
      next: (): RequestSpec | null => {
        const token = env.tokens.take();
        if (token === null) return null;
        return {
          method: 'POST',
          path: '/auth/v1/token',
          headers: { ...JSON_HEADERS, apikey: env.anonKey },
          body: JSON.stringify({ grant_type: 'refresh_token', refresh_token: token }),
        };
      },
      onResponse: env.tokens.collect,
    }),
    baseline: health,
  },
  {
    name: 'password-signin',
    what: 'POST /auth/v1/token password (argon2id verify)',
    target: { kind: 'ratio', min: 0.8 },
    baselineLabel: 'bare argon2.verify, same parameters',
    // argon2 is bound by the threadpool (4) and the cores (2): a few in flight saturate it.
    connections: 8,
    needsAuth: true,
    service: (env) => ({
      requests: env.users.map((u) => ({
        method: 'POST',
        path: '/auth/v1/token',
        headers: { ...JSON_HEADERS, apikey: env.anonKey },
        body: JSON.stringify({ grant_type: 'password', email: u.email, password: u.password }),
      })),
      onResponse: env.tokens.collect,
    }),
    baseline: () => 'argon2',
  },
  {
    name: 'http-overhead',
    what: "GET /health (select 1) through the service's HTTP shell",
    target: { kind: 'none' },
    baselineLabel: 'bare fastify /health, same query and body',
    service: health,
    baseline: health,
  },
  ...DB_LIMIT_SCENARIOS,
  ...SLOW_NEIGHBOUR_SCENARIOS,
  ...WEBHOOK_SCENARIOS,
  ...JOB_SCENARIOS,
  ...FUNCTION_SCENARIOS,
  ...FUNCTIONS_PROXY_SCENARIOS,
  ...LIVE_SCENARIOS,
  ...REALTIME_SCENARIOS,
  ...STORAGE_SCENARIOS,
  ...STORAGE_EXTRA_SCENARIOS,
  ...RENDER_LOAD_SCENARIOS,
  ...OPS_SCENARIOS,
  ...IDLE_RSS_SCENARIOS,
  ...WORKERS_SCENARIOS,
];

/**
 * The order of the run: password sign-in before token refresh (it yields refresh tokens),
 * both before the REST writes (tens of thousands of inserted rows leave autovacuum and
 * checkpoint work behind, which slowed the SQL part of sign-in), and the insert last.
 */
export const RUN_ORDER = ['http-overhead', 'password-signin', 'token-refresh', 'rest-get-by-key', 'rest-get-by-key-workers', 'rest-get-by-key-db-limit', 'rest-get-beside-slow', 'rest-list-embed', 'rpc-stable', 'functions-db', 'functions-deno', 'functions-proxy', 'rest-insert', 'webhook-write-cost', 'webhook-throughput', 'jobs-drain', 'live-latency', 'live-per-subscriber', 'broadcast-fanout', 'live-write-cost', 'live-write-cost-rerun', 'realtime-changes', 'realtime-write-cost', 'storage-upload', 'storage-download', 'storage-upload-database', 'storage-download-database', 'storage-resumable', 'storage-thumbnail', 'storage-render-load', 'metrics-scrape', 'otel-idle', 'idle-rss'];
