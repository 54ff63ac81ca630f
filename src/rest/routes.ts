/**
 * The REST area's HTTP layer, as PostgREST's `App.hs`: a handler parses its request
 * (request.ts), prepares it (prepare.ts: plan, build, cached by shape), runs it as the caller
 * (execute.ts) and sends the outcome as is, with the headers the answer carries.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../core/area.ts';
import { gatedCredential } from '../core/credentials.ts';
import { pgErrorToAppError } from '../core/errors.ts';
import { sendJsonText } from '../core/http.ts';
import { NO_PREFER, type Prefer } from './prefer.ts';
import { prepare } from './prepare.ts';
import { parseRpcRequest, parseTableRequest, rawQuery, type Method, type PlanRequest } from './request.ts';
import type { RestTxEnd } from '../core/config.ts';
import { execute, explain, type Outcome } from './execute.ts';
import { compatOutcome, compatPreferenceApplied } from './compat.ts';
import { buildOpenApi, reachableQuery, type Reachable } from './openapi.ts';
import { runBatch, validateBatch } from './batch.ts';
import { markWrite, replicaMayRead } from './consistency.ts';
import type { Reloading } from '../core/reloading.ts';
import type { Catalog } from './catalog.ts';

const SINGULAR_TYPE = 'application/vnd.pgrst.object+json';

/** Answers a plan: `application/vnd.pgrst.plan+<format>; for="application/json"` as PostgREST. */
function sendPlan(reply: FastifyReply, { format }: PlanRequest, body: string): FastifyReply {
  return reply.code(200).type(`application/vnd.pgrst.plan+${format}; for="application/json"; charset=utf-8`).send(body);
}

/** `Preference-Applied` (PostgREST) for the preferences that changed what happened. */
function preferenceApplied(reply: FastifyReply, txEnd: RestTxEnd, prefer: Prefer, extra: string | null): void {
  const applied: string[] = [];
  if (prefer.tx !== null && txEnd.endsWith('-allow-override')) applied.push('tx=' + prefer.tx);
  if (extra !== null) applied.push(extra);
  if (applied.length > 0) reply.header('preference-applied', applied.join(', '));
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

  const compat = config.supabaseCompat;
  const opts = { txEnd, plans, compat };

  /** A table or function request: credentials → parse → prepare (plan, build, cached by shape) → execute → send. */
  const answer = async (req: FastifyRequest, reply: FastifyReply, kind: 'table' | 'rpc', name: string, method: Method): Promise<FastifyReply> => {
    const cred = gatedCredential(req);
    const r = kind === 'table' ? parseTableRequest(req, name, method, opts) : parseRpcRequest(req, name, method === 'POST' ? 'POST' : 'GET', opts);
    const p = prepare(await cache.get(), r);
    if (r.explain !== null) return sendPlan(reply, r.explain, await explain(db, cred, p, r.explain));
    // A GET is a read (a function's only when stable or immutable: it has a max-age); anything else may write.
    const read = r.method === 'GET' && (r.kind === 'table' || p.statement.maxAge !== null);
    const done = await execute(db, cred, p, { read: replicas && read && replicaMayRead(req, r.prefer, ryw) });
    const out = compat ? compatOutcome(done, p.statement, r.kind === 'table' && r.method === 'GET') : done;
    if (replicas && !read) markWrite(reply, ryw);
    if (compat) {
      const applied = compatPreferenceApplied(req.headers.prefer, { kind: r.kind, method: r.method, txAllowed: txEnd.endsWith('-allow-override'), prefer: r.prefer });
      if (applied !== null) reply.header('preference-applied', applied);
    } else if (r.prefer !== NO_PREFER) preferenceApplied(reply, txEnd, r.prefer, r.kind === 'table' && r.method === 'POST' && r.prefer.missingDefault ? 'missing=default' : null);
    if (r.kind === 'rpc') cacheHeaders(reply, req, p.statement.maxAge);
    return send(reply, out, p.statement.singular, p.statement.csvHeader !== undefined);
  };

  const table = (method: Method) => (req: FastifyRequest, reply: FastifyReply) => answer(req, reply, 'table', (req.params as { table: string }).table, method);
  // Every route here: the caller's credential set once by the hook, taken with gatedCredential(req).
  const caller = { preHandler: credentials.caller };
  app.get('/rest/v1/:table', caller, table('GET'));
  app.post('/rest/v1/:table', caller, table('POST'));
  app.patch('/rest/v1/:table', caller, table('PATCH'));
  app.delete('/rest/v1/:table', caller, table('DELETE'));

  const rpc = (method: 'GET' | 'POST') => (req: FastifyRequest, reply: FastifyReply) => answer(req, reply, 'rpc', (req.params as { name: string }).name, method);
  app.get('/rest/v1/rpc/:name', caller, rpc('GET'));
  app.post('/rest/v1/rpc/:name', caller, rpc('POST'));

  app.post('/rest/v1/batch', caller, async (req, reply) => {
    const cred = gatedCredential(req);
    const batch = validateBatch(req.body, config.maxBatchOperations);
    const cat = await cache.get();
    const out = await runBatch(db, cat, cred, batch);
    if (replicas) markWrite(reply, ryw);
    return sendJsonText(reply, out.status, out.body);
  });

  const openapi = async (req: FastifyRequest, reply: FastifyReply) => {
    const cred = gatedCredential(req);
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
  app.get('/rest/v1/', caller, openapi);
  app.get('/rest/v1', caller, openapi);

  app.get('/rest/v1/rls-debug', caller, async (req, reply) => {
    const cred = gatedCredential(req);
    return reply.code(200).send({ role: cred.role, claims: cred.claimsObject });
  });
}
