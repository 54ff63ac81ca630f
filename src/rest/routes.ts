/**
 * The REST area's HTTP layer: headers (Accept, Prefer, Range, the profiles) → the compiler's
 * options, the prepared statement run as the caller, the outcome sent as is.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../core/area.ts';
import { AppError, ERRORS, pgErrorToAppError } from '../core/errors.ts';
import { sendJsonText } from '../core/http.ts';
import { NO_PREFER, parsePrefer, type Prefer } from './prefer.ts';
import { REST_ERRORS } from './errors.ts';
import { prepareRpc, prepareTable } from './compile.ts';
import type { Method, Prepared } from './plan.ts';
import type { RestTxEnd } from '../core/config.ts';
import { execute, explain, type Outcome, type PlanRequest } from './execute.ts';
import { buildOpenApi, reachableQuery, type Reachable } from './openapi.ts';
import { runBatch, validateBatch } from './batch.ts';
import { markWrite, replicaMayRead } from './consistency.ts';
import type { Reloading } from '../core/reloading.ts';
import type { Catalog } from './catalog.ts';

const SINGULAR_TYPE = 'application/vnd.pgrst.object+json';

function rawQuery(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? '' : url.slice(q + 1);
}

function wantsSingular(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes(SINGULAR_TYPE);
}

function wantsCsv(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes('text/csv');
}

/** The media types an answer can be given in (parameters such as `charset` aside). */
const PRODUCIBLE = new Set(['*/*', 'application/*', 'application/json', SINGULAR_TYPE, 'application/vnd.pgrst.object', 'text/csv']);

/**
 * `Accept` negotiation: an `Accept` that names none of the types plinth produces (JSON, the
 * single object, CSV) answers 406 rather than JSON the client did not ask for.
 */
function checkAccept(accept: string | undefined, plans: boolean): void {
  if (accept === undefined || accept === '') return;
  for (const part of accept.split(',')) {
    const type = mediaType(part);
    if (type === '' || PRODUCIBLE.has(type) || (plans && PLAN_TYPES.has(type))) return;
  }
  throw REST_ERRORS.notAcceptable();
}

/** One entry of an Accept header without its parameters, lower-cased. */
function mediaType(part: string): string {
  const semi = part.indexOf(';');
  return (semi < 0 ? part : part.slice(0, semi)).trim().toLowerCase();
}

/** The execution-plan media types (PostgREST): JSON, or text (also the bare type). */
const PLAN_TYPES = new Map<string, 'json' | 'text'>([
  ['application/vnd.pgrst.plan+json', 'json'],
  ['application/vnd.pgrst.plan+text', 'text'],
  ['application/vnd.pgrst.plan', 'text'],
]);

/** The EXPLAIN options a plan type may name (`options=analyze|verbose|…`, as PostgREST). */
const PLAN_OPTIONS = new Set(['analyze', 'verbose', 'settings', 'buffers', 'wal']);

/**
 * The plan the first plan type in Accept asks for — its format and the EXPLAIN options of its
 * `options=` parameter (unknown names are ignored) — or null when none does.
 */
function wantsPlan(accept: string | undefined): PlanRequest | null {
  if (accept === undefined || !accept.includes('application/vnd.pgrst.plan')) return null;
  for (const part of accept.split(',')) {
    const format = PLAN_TYPES.get(mediaType(part));
    if (format === undefined) continue;
    const param = /;\s*options\s*=\s*"?([a-z|]+)"?/i.exec(part)?.[1] ?? '';
    const options = [...new Set(param.toLowerCase().split('|'))].filter((o) => PLAN_OPTIONS.has(o));
    return { format, options };
  }
  return null;
}

/** Answers a plan: `application/vnd.pgrst.plan+<format>; for="application/json"` as PostgREST. */
function sendPlan(reply: FastifyReply, { format }: PlanRequest, body: string): FastifyReply {
  return reply.code(200).type(`application/vnd.pgrst.plan+${format}; for="application/json"; charset=utf-8`).send(body);
}

/** Whether the transaction ends in a rollback: REST_TX_END, overridden by `Prefer: tx=` where it allows. */
function rollsBack(txEnd: RestTxEnd, prefer: Prefer): boolean {
  switch (txEnd) {
    case 'commit':
      return false;
    case 'rollback':
      return true;
    case 'commit-allow-override':
      return prefer.tx === 'rollback';
    case 'rollback-allow-override':
      return prefer.tx !== 'commit';
  }
}

/** `Preference-Applied` (PostgREST) for the preferences that changed what happened. */
function preferenceApplied(reply: FastifyReply, txEnd: RestTxEnd, prefer: Prefer, extra: string | null): void {
  const applied: string[] = [];
  if (prefer.tx !== null && txEnd.endsWith('-allow-override')) applied.push('tx=' + prefer.tx);
  if (extra !== null) applied.push(extra);
  if (applied.length > 0) reply.header('preference-applied', applied.join(', '));
}

/**
 * `Accept-Profile` / `Content-Profile` (postgrest-js `.schema()`): only `public` is exposed,
 * so naming another schema is 406 rather than an answer from `public`.
 */
function checkProfile(req: FastifyRequest): void {
  if (!publicProfile(req)) throw REST_ERRORS.schemaNotExposed();
}

function publicProfile(req: FastifyRequest): boolean {
  for (const h of [req.headers['accept-profile'], req.headers['content-profile']]) {
    if (h !== undefined && (Array.isArray(h) || h.trim() !== 'public')) return false;
  }
  return true;
}

/** `Range: from-to` / `from-` (items; PostgREST, 0-based, inclusive); malformed: 400. */
function parseRange(req: FastifyRequest): { from: number; to: number | null } | null {
  const h = req.headers.range;
  if (h === undefined) return null;
  const unit = req.headers['range-unit'];
  if (unit !== undefined && unit !== 'items') return null;
  const m = /^\s*(\d{1,15})-(\d{0,15})\s*$/.exec(h);
  if (m === null) throw ERRORS.invalidRequest();
  const from = Number(m[1]);
  const to = m[2] === '' ? null : Number(m[2]);
  if (to !== null && to < from) throw ERRORS.invalidRequest();
  return { from, to };
}

function send(reply: FastifyReply, out: Outcome, singular: boolean, csv = false): FastifyReply {
  if (out.contentRange !== null) reply.header('content-range', out.contentRange);
  if (out.body === null) return reply.code(out.status).send();
  if (singular) return reply.code(out.status).type(SINGULAR_TYPE + '; charset=utf-8').send(out.body);
  if (csv) return reply.code(out.status).type('text/csv; charset=utf-8').send(out.body);
  return sendJsonText(reply, out.status, out.body);
}

/** Any credential present, for Cache-Control (docs/api/rest.md). */
function credentialPresent(req: FastifyRequest): boolean {
  const h = req.headers;
  if (h.authorization || h.apikey) return true;
  if (typeof h.cookie === 'string' && /(?:^|;)\s*token=/.test(h.cookie)) return true;
  const q = rawQuery(req.url);
  return q.includes('token') && new URLSearchParams(q).has('token');
}

function cacheHeaders(reply: FastifyReply, req: FastifyRequest, maxAge: number | null): void {
  if (maxAge === null) return;
  if (credentialPresent(req)) {
    reply.header('cache-control', `private, max-age=${maxAge}`);
    const prior = reply.getHeader('vary');
    const vary = prior === undefined ? [] : Array.isArray(prior) ? prior.map(String) : [String(prior)];
    reply.header('vary', [...vary, 'Authorization', 'apikey']);
  } else {
    reply.header('cache-control', `public, max-age=${maxAge}`);
  }
}

export function routes(app: FastifyInstance, deps: Deps, cache: Reloading<Catalog>): void {
  const { db, credentials, config } = deps;
  const txEnd = config.restTxEnd;
  const plans = config.restPlanEnabled;
  // With replicas: reads a replica may serve go there, and writes leave their client's mark.
  const replicas = db.replicas.length > 0;
  const ryw = config.readYourWritesMs;

  const table = (method: Method) => async (req: FastifyRequest<{ Params: { table: string } }>, reply: FastifyReply) => {
    const cred = await credentials.api(req);
    checkProfile(req);
    const accept = req.headers.accept;
    checkAccept(accept, plans);
    const cat = await cache.get();
    const singular = wantsSingular(accept);
    const csv = method === 'GET' && wantsCsv(accept);
    const prefer = parsePrefer(req.headers.prefer);
    const p = prepareTable(cat, {
      method,
      table: req.params.table,
      query: rawQuery(req.url),
      body: req.body,
      bodyText: req.bodyText,
      prefer,
      singular,
      csv,
      range: method === 'GET' ? parseRange(req) : null,
      rollback: method !== 'GET' && rollsBack(txEnd, prefer),
    });
    const planFormat = plans ? wantsPlan(accept) : null;
    if (planFormat !== null) return sendPlan(reply, planFormat, await explain(db, cred, p, planFormat));
    const read = method === 'GET';
    const out = await execute(db, cred, p, { read: replicas && read && replicaMayRead(req, prefer, ryw) });
    if (replicas && !read) markWrite(reply, ryw);
    if (prefer !== NO_PREFER) preferenceApplied(reply, txEnd, prefer, method === 'POST' && prefer.missingDefault ? 'missing=default' : null);
    return send(reply, out, p.plan.singular, p.plan.csvHeader !== undefined);
  };
  app.get('/rest/v1/:table', table('GET'));
  app.post('/rest/v1/:table', table('POST'));
  app.patch('/rest/v1/:table', table('PATCH'));
  app.delete('/rest/v1/:table', table('DELETE'));

  const rpc = (method: 'GET' | 'POST') => async (req: FastifyRequest<{ Params: { name: string } }>, reply: FastifyReply) => {
    const cred = await credentials.api(req);
    // A function outside `public` is not found (docs/api/rest.md, RPC), whatever the profile names.
    if (!publicProfile(req)) throw REST_ERRORS.functionNotFound();
    checkAccept(req.headers.accept, plans);
    const cat = await cache.get();
    const prefer = parsePrefer(req.headers.prefer);
    let p: Prepared;
    if (method === 'POST') {
      p = prepareRpc(cat, { method, name: req.params.name, body: req.body, bodyText: req.bodyText, query: rawQuery(req.url), count: prefer.count });
    } else {
      const query = rawQuery(req.url);
      try {
        p = prepareRpc(cat, { method, name: req.params.name, query, count: prefer.count });
      } catch (err) {
        // `token` in the query string marks a credential for caching (docs/api/rest.md); it is an
        // argument only for a function that takes one.
        const sp = new URLSearchParams(query);
        if (!(err instanceof AppError) || err.status !== 400 || !sp.has('token')) throw err;
        sp.delete('token');
        p = prepareRpc(cat, { method, name: req.params.name, query: sp.toString(), count: prefer.count });
      }
    }
    const planFormat = plans ? wantsPlan(req.headers.accept) : null;
    if (planFormat !== null) return sendPlan(reply, planFormat, await explain(db, cred, p, planFormat));
    const rollback = rollsBack(txEnd, prefer);
    const maxAffected = prefer.strict && prefer.maxAffected !== null ? prefer.maxAffected : undefined;
    if (rollback || maxAffected !== undefined) p = { ...p, rollback, maxAffected };
    // A GET of a stable or immutable function is a read (it has a max-age); anything else may write.
    const read = method === 'GET' && p.plan.maxAge !== null;
    const out = await execute(db, cred, p, { read: replicas && read && replicaMayRead(req, prefer, ryw) });
    if (replicas && !read) markWrite(reply, ryw);
    if (prefer !== NO_PREFER) preferenceApplied(reply, txEnd, prefer, null);
    cacheHeaders(reply, req, p.plan.maxAge);
    return send(reply, out, false);
  };
  app.get('/rest/v1/rpc/:name', rpc('GET'));
  app.post('/rest/v1/rpc/:name', rpc('POST'));

  app.post('/rest/v1/batch', async (req, reply) => {
    const cred = await credentials.api(req);
    const batch = validateBatch(req.body, config.maxBatchOperations);
    const cat = await cache.get();
    const out = await runBatch(db, cat, cred, batch);
    if (replicas) markWrite(reply, ryw);
    return sendJsonText(reply, out.status, out.body);
  });

  const openapi = async (req: FastifyRequest, reply: FastifyReply) => {
    const cred = await credentials.api(req);
    const cat = await cache.get();
    let rows;
    try {
      rows = await db.withContext(cred, reachableQuery);
    } catch (err) {
      throw pgErrorToAppError(err);
    }
    const reach: Reachable = { rels: JSON.parse(rows[0].rels as string) as Reachable['rels'], funcs: JSON.parse(rows[0].funcs as string) as Reachable['funcs'] };
    const doc = buildOpenApi(cat, reach, { host: req.headers.host, scheme: req.protocol });
    return reply.code(200).type('application/openapi+json; charset=utf-8').send(JSON.stringify(doc));
  };
  app.get('/rest/v1/', openapi);
  app.get('/rest/v1', openapi);

  app.get('/rest/v1/rls-debug', async (req, reply) => {
    const cred = await credentials.api(req);
    return reply.code(200).send({ role: cred.role, claims: cred.claimsObject });
  });
}
