/**
 * The edge functions area (docs/api/functions.md).
 *
 *   GET  /functions/v1/            service_role: the Edge function entries
 *   POST /functions/v1/_refresh    service_role: reload the catalog on every instance
 *   ANY  /functions/v1/{name}[/…]  call a function (GET and POST in the interface)
 *
 * A call: the path after the name checked (path.ts: a `.`/`..` segment, raw or encoded, or
 * an encoded slash or backslash: 400 `invalid function path`) → catalog (in memory) →
 * unknown or not active: 404 `function not found` → verify_jwt: a credential that
 * verifies, else 401 (development mode: none = anon, as everywhere) → by runtime:
 *
 * - `deno`: streamed to EDGE_RUNTIME_URL, or to the bundled Deno runtime that this area
 *   supervises when EDGE_RUNTIME_URL is unset and FUNCTIONS_DIR exists (supervisor.ts);
 *   neither: 503 `edge runtime not configured`; down: 502; hung: 504 (forward.ts). An
 *   `Authorization` or `apikey` that does not verify is not forwarded (with verify_jwt =
 *   false it is dropped and the call goes on without it). The bundled runtime starts once
 *   the service listens, since its network denials name the service's own port (net.ts).
 * - `plv8`: `public.<name>(payload jsonb)` as the caller, in one round trip on the request
 *   path of REST (`db.withContext` through REST's own executor, so the error mapping of docs/api/overview.md is
 *   the same code). POST (or any method with a body): the JSON body is the payload, `{}`
 *   when there is none; GET: the query string as an object of strings.
 *
 * Bodies are not parsed by fastify here: a deno call's body streams through untouched, a
 * plv8 call's body is read (up to MAX_BODY_BYTES) and checked to be JSON.
 */
import { existsSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { gatedCredential, type Credential, type Credentials } from '../core/credentials.ts';
import type { Area, Deps, Listeners } from '../core/area.ts';
import type { RuntimeConfig } from '../core/config.ts';
import type { RequestContext } from '../core/db.ts';
import { ERRORS, pgErrorToAppError } from '../core/errors.ts';
import { ownUrl, sendJsonText } from '../core/http.ts';
import { hooks as spanHooks } from '../core/spans.ts';
import { execute } from '../rest/execute.ts';
import { FunctionCache, type FunctionEntry } from './catalog.ts';
import { FUNCTION_ERRORS, createForwarder } from './forward.ts';
import { databaseTargets, netFlags, postgresTargets, type Target } from './net.ts';
import { encodeSegment, functionPath } from './path.ts';
import { RuntimePool, denoCacheDir, denoExecutable } from './supervisor.ts';

const PREFIX = '/functions/v1';
/** The verified caller's claims (JSON), as a function receives them. */
export const CALLER_HEADER = 'x-caller-claims';

/**
 * The bundled runtime's environment: the FUNCTIONS_ENV variables, and how to call plinth
 * back, as Supabase gives its functions: the service's URL and the anon key (under plinth's
 * names and Supabase's); the service-role key only under a name FUNCTIONS_ENV lists.
 */
function functionEnv(config: RuntimeConfig, url: string): Record<string, string | null> {
  const env: Record<string, string | null> = { ...config.functionsEnv, PLINTH_URL: url, PLINTH_ANON_KEY: config.anonKey, SUPABASE_URL: url, SUPABASE_ANON_KEY: config.anonKey };
  for (const name of ['PLINTH_SERVICE_ROLE_KEY', 'SUPABASE_SERVICE_ROLE_KEY']) if (name in config.functionsEnv) env[name] = config.serviceRoleKey;
  return env;
}
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
/** How long a call waits for the bundled runtime's first start before 502. */
const FIRST_START_WAIT_MS = 15_000;

/** What a running instance of this area holds; per fastify instance (several services may share a process). */
interface FunctionsState {
  /** The bundled runtime: one process per function (supervisor.ts). */
  pool: RuntimePool | null;
  /** Why the bundled runtime cannot run (no Deno binary), once found out. */
  noDeno: Error | null;
}

const states = new WeakMap<FastifyInstance, FunctionsState>();

/** Where a deno function's calls go. */
interface Runtime {
  base: string;
  secret: string | null;
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;
const NONE: ReadonlySet<string> = new Set();
const AUTHORIZATION: ReadonlySet<string> = new Set(['authorization']);
const APIKEY: ReadonlySet<string> = new Set(['apikey']);
const BOTH: ReadonlySet<string> = new Set(['authorization', 'apikey']);

/** The credential headers to drop, given whether each verified (one shared set per case). */
function dropped(authorization: boolean, apikey: boolean): ReadonlySet<string> {
  return authorization ? (apikey ? NONE : APIKEY) : apikey ? AUTHORIZATION : BOTH;
}

/** The bundled Deno runtime of a service's app (its processes, one per function), if it started one (tests, bench). */
export function bundledRuntime(app: FastifyInstance): RuntimePool | null {
  return states.get(app)?.pool ?? null;
}

function hasBody(req: FastifyRequest): boolean {
  const len = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (len !== undefined && len !== '0');
}

/** The plv8 payload as JSON text: the body (checked JSON), `{}` without one; GET: the query string. */
async function payloadOf(req: FastifyRequest, limit: number): Promise<string> {
  if (req.method === 'GET' || req.method === 'HEAD') {
    const q = req.url.indexOf('?');
    return JSON.stringify(Object.fromEntries(new URLSearchParams(q < 0 ? '' : req.url.slice(q + 1))));
  }
  if (!hasBody(req)) return '{}';
  const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limit) throw ERRORS.bodyTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req.raw as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw ERRORS.bodyTooLarge();
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return '{}';
  if (type !== 'application/json') throw ERRORS.invalidBody();
  try {
    JSON.parse(text);
  } catch {
    throw ERRORS.invalidBody();
  }
  return text;
}

/** The ports the service listens on (known once it listens), the metrics listener's included. */
function listeningPorts(app: FastifyInstance, listeners: Listeners): number[] {
  const ports: number[] = [];
  for (const a of app.addresses() as Array<string | { port: number }>) if (typeof a === 'object' && !ports.includes(a.port)) ports.push(a.port);
  if (listeners.metricsPort !== null && !ports.includes(listeners.metricsPort)) ports.push(listeners.metricsPort);
  return ports;
}

/** The bundled runtime, started at the first need, and the runtime a deno function's calls go to. */
interface Runtimes {
  startBundled: () => RuntimePool | null;
  /** The runtime's address and the secret that proves a call comes from plinth: without a promise once the function's process is up. */
  runtimeOf: (name: string) => Runtime | Promise<Runtime>;
}

function runtimes(root: FastifyInstance, deps: Deps, state: FunctionsState, database: readonly Target[]): Runtimes {
  const { config, log } = deps;
  const startBundled = (): RuntimePool | null => {
    if (state.pool !== null) return state.pool;
    if (state.noDeno !== null || !existsSync(config.functionsDir)) return null;
    const exe = denoExecutable();
    if (exe instanceof Error) {
      state.noDeno = exe;
      log.error({ err: exe }, 'the bundled edge runtime cannot start: no Deno binary from the deno package');
      return null;
    }
    const net = netFlags({ allow: config.functionsAllowNet, deny: config.functionsDenyNet }, listeningPorts(root, deps.listeners), database);
    state.pool = new RuntimePool(exe, {
      functionsDir: config.functionsDir,
      env: functionEnv(config, ownUrl(root, config)),
      cacheDir: denoCacheDir(config.dataDir),
      net,
      log,
      memoryMb: config.functionsMemoryMb,
      cpuMs: Math.max(1000, config.functionsTimeoutMs),
    });
    return state.pool;
  };
  const runtimeOf = (name: string): Runtime | Promise<Runtime> => {
    if (config.edgeRuntimeUrl !== null) return { base: config.edgeRuntimeUrl, secret: config.edgeRuntimeSecret };
    const pool = startBundled();
    if (pool === null) throw FUNCTION_ERRORS.notConfigured();
    const sup = pool.member(name);
    const up = (): Runtime => {
      const { url, secret } = sup;
      if (url === null || secret === null) throw FUNCTION_ERRORS.unavailable();
      return { base: url, secret };
    };
    // The first start is awaited; after a crash (or a failed first start), calls get 502
    // until the runtime is up again.
    if (sup.url === null && sup.firstStart) return sup.ready(FIRST_START_WAIT_MS).then(up);
    return up();
  };
  return { startBundled, runtimeOf };
}

/** An apikey that verifies is honoured only as the anon or service-role key. */
const keyOk = (c: Credential | null) => c !== null && (c.role === 'anon' || c.role === 'service_role');

/**
 * The credential headers not to forward: an `Authorization` or `apikey` that does not
 * verify on its own (apikey: the anon or service-role key only). With verify_jwt = true a
 * call gets here only when its credential verified, so this drops only a second one.
 * Without a promise when both were verified before (the hot path).
 */
function unverified(credentials: Credentials, req: FastifyRequest): ReadonlySet<string> | Promise<ReadonlySet<string>> {
  const { authorization, apikey } = req.headers;
  let authOk: boolean | Promise<boolean> = true;
  if (authorization !== undefined) {
    const m = BEARER.exec(authorization);
    const c = m === null ? null : credentials.check(m[1]);
    authOk = c instanceof Promise ? c.then((v) => v !== null) : c !== null;
  }
  let keyOkay: boolean | Promise<boolean> = true;
  if (apikey !== undefined) {
    const c = typeof apikey === 'string' ? credentials.check(apikey) : null;
    keyOkay = c instanceof Promise ? c.then(keyOk) : keyOk(c);
  }
  if (authOk instanceof Promise || keyOkay instanceof Promise) return Promise.all([authOk, keyOkay]).then(([a, k]) => dropped(a, k));
  return dropped(authOk, keyOkay);
}

/** The caller of a function: verify_jwt, a credential that verifies (else 401); without it, no check, but a credential that does verify still sets the role. */
function callerOf(credentials: Credentials, req: FastifyRequest, entry: FunctionEntry): RequestContext | Promise<RequestContext> {
  if (entry.verifyJwt) return credentials.api(req);
  return credentials.fromHeaders(req.headers).then(
    (c) => c ?? credentials.anonymous,
    () => credentials.anonymous,
  );
}

type Forwarder = ReturnType<typeof createForwarder>;

/** The handler of a call: catalog → plv8 in the database, or deno through the forwarder. */
function invoker(deps: Deps, cache: FunctionCache, forwarder: Forwarder, runtimeOf: Runtimes['runtimeOf']) {
  const { db, credentials, config, metrics } = deps;
  return async (req: FastifyRequest<{ Params: { name: string } }>, reply: FastifyReply) => {
    const name = req.params.name;
    const path = functionPath(req.url, name);
    let entry: FunctionEntry | undefined;
    try {
      const catalog = cache.get();
      entry = (catalog instanceof Promise ? await catalog : catalog).get(name);
    } catch (err) {
      throw pgErrorToAppError(err);
    }
    if (entry === undefined || entry.status !== 'active' || entry.runtime === null) throw FUNCTION_ERRORS.notFound();
    if (entry.runtime === 'plv8') {
      const caller = await callerOf(credentials, req, entry);
      if (entry.statement === null) throw FUNCTION_ERRORS.notFound();
      const payload = await payloadOf(req, config.maxBodyBytes);
      const out = await execute(db, caller, { statement: entry.statement, params: [payload], offset: 0 });
      return sendJsonText(reply, out.status, out.body ?? 'null');
    }
    // The caller as plinth verified it, for the function: whatever a caller sent under this
    // name is replaced (verify_jwt = false and no valid credential: the anon claims).
    // (Each step below answers without a promise on the hot path: a token seen before, a
    // runtime that is up.)
    const caller = callerOf(credentials, req, entry);
    req.headers[CALLER_HEADER] = (caller instanceof Promise ? await caller : caller).claims;
    const unforwarded = unverified(credentials, req);
    const drop = unforwarded instanceof Promise ? await unforwarded : unforwarded;
    const runtime = runtimeOf(name);
    const { base, secret } = runtime instanceof Promise ? await runtime : runtime;
    // Counted for functions of the catalog only: the label's values stay bounded.
    const series = metrics.function(name);
    series.invocations++;
    const span = spanHooks?.child(req.id, `function ${name}`, { 'faas.invoked_name': name }) ?? null;
    const t0 = performance.now();
    try {
      const out = await forwarder.forward(req, reply, { base, path, name: encodeSegment(name), secret, drop });
      if (reply.raw.statusCode >= 500) series.errors++;
      span?.end();
      return out;
    } catch (err) {
      series.errors++;
      if ((err as { status?: unknown }).status === 504) series.timeouts++;
      span?.end(err);
      throw err;
    } finally {
      series.observe((performance.now() - t0) / 1000);
    }
  };
}

function routes(app: FastifyInstance, root: FastifyInstance, deps: Deps, cache: FunctionCache, state: FunctionsState, database: readonly Target[]): void {
  const { db, credentials, config, lifecycle } = deps;
  const forwarder = createForwarder(config.functionsTimeoutMs, lifecycle.cut);
  app.addHook('onClose', () => forwarder.close());

  // Bodies stay unread streams: a deno call pipes them, a plv8 call reads its own.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));

  const { startBundled, runtimeOf } = runtimes(root, deps, state, database);
  const invoke = invoker(deps, cache, forwarder, runtimeOf);

  const serviceRoleGate = credentials.requireRole('service_role');
  const list = async (req: FastifyRequest, reply: FastifyReply) => {
    const cred = gatedCredential(req);
    let rows;
    try {
      rows = await db.withContext(cred, (c) => c`select edge.function_list()::text as body`);
    } catch (err) {
      throw pgErrorToAppError(err);
    }
    return sendJsonText(reply, 200, rows[0].body as string);
  };

  app.get(`${PREFIX}/`, { onRequest: serviceRoleGate }, list);
  app.get(PREFIX, { onRequest: serviceRoleGate }, list);
  app.post(`${PREFIX}/_refresh`, { onRequest: serviceRoleGate }, async (_req, reply) => {
    try {
      await cache.reload();
      await db.notifyCacheReload('functions');
    } catch (err) {
      throw pgErrorToAppError(err);
    }
    return reply.code(200).send({ ok: true });
  });
  app.route({ method: METHODS, url: `${PREFIX}/:name`, handler: invoke });
  app.route({ method: METHODS, url: `${PREFIX}/:name/*`, handler: invoke });

  // The bundled runtime starts as soon as the service listens: a process for each active
  // deno function of the catalog (calls before it is up wait for it); a function added
  // later gets its process at its first call.
  if (config.edgeRuntimeUrl === null) {
    root.addHook('onListen', (done) => {
      const pool = startBundled();
      if (pool !== null) {
        Promise.resolve(cache.get()).then(
          (entries) => {
            for (const [name, e] of entries) if (e.status === 'active' && e.runtime === 'deno') pool.member(name);
          },
          () => {},
        );
      }
      done();
    });
  }
}

/**
 * Every database address plinth is given: the one it uses (the embedded one included),
 * DATABASE_URL, DATABASE_DIRECT_URL, DATABASE_READ_URL, ROOT_DATABASE_URL and SHADOW_DATABASE_URL.
 */
function givenDatabases({ db, config }: Deps): Target[] {
  const { host, port } = db.sql.options;
  // postgres.js's own split of its URL (an IPv6 host comes out cut: the URLs below give it whole).
  const used = host.map((h, i) => ({ host: h, port: port[i] ?? port[0] ?? 5432 })).filter((t) => !/[[\]]/.test(t.host));
  const urls = [config.databaseUrl, config.databaseDirectUrl, ...config.databaseReadUrls, config.rootDatabaseUrl, config.shadowDatabaseUrl];
  return [...used, ...urls.flatMap((u) => (u === null ? [] : postgresTargets(u)))];
}

export const functionsArea: Area = {
  name: 'functions',
  async register(app, deps) {
    const cache = new FunctionCache(deps.db.sql, deps.log);
    deps.db.onCacheReload('functions', () => cache.reload());
    // DDL in public (the REST event trigger's `rest`) may create or drop a plv8 function.
    deps.db.onCacheReload('rest', () => cache.reload());
    await cache.reload().catch((err: unknown) => deps.log.warn({ err }, 'function catalog not loaded at start'));

    const state: FunctionsState = { pool: null, noDeno: null };
    states.set(app, state);
    app.addHook('onClose', async () => {
      await state.pool?.stop();
    });
    // The databases the functions must not reach: resolved once, before the runtime starts.
    const database = deps.config.edgeRuntimeUrl === null ? await databaseTargets(givenDatabases(deps)) : [];
    await app.register(async (scope) => routes(scope, app, deps, cache, state, database));
  },
};
