/**
 * REST's stages joined, and the one entry to them (the routes, the batch and edge functions
 * use this and execute.ts, nothing else of REST): a parsed request (request.ts) is planned
 * against the catalog (plan.ts); the statement of its shape is taken from the catalog's
 * cache, or built from the plan tree (sql/build.ts) and remembered; its values are bound.
 *
 *     prepare(cat, request) = bind(cached(shape) ?? build(plan.tree()))
 *
 * The SQL text depends only on the request's shape, so one text serves every request of that
 * shape and is one prepared statement on every connection.
 */
import { AppError } from '../core/errors.ts';
import type { Catalog, Func } from './catalog.ts';
import { planRpc, planTable, type Planned } from './plan.ts';
import { jsonCall } from './plan/rpc.ts';
import type { ApiRequest, RpcRequest } from './request.ts';
import { build } from './sql/build.ts';
import type { Prepared, Statement } from './statement.ts';

export type { Prepared, Statement } from './statement.ts';

function bind(cat: Catalog, p: Planned): Prepared {
  const statement = cat.cached<Statement>(p.key) ?? cat.remember(p.key, build(p.tree()));
  const out: Prepared = p.ranged === true ? { statement, params: p.params, offset: p.offset, ranged: true } : { statement, params: p.params, offset: p.offset };
  return p.rollback === true || p.maxAffected !== undefined ? { ...out, rollback: p.rollback === true, maxAffected: p.maxAffected } : out;
}

/** A request to a table or a function, ready to run. */
export function prepare(cat: Catalog, req: ApiRequest): Prepared {
  return bind(cat, req.kind === 'table' ? planTable(cat, req) : rpcPlanned(cat, req));
}

function rpcPlanned(cat: Catalog, req: RpcRequest): Planned {
  if (req.method === 'POST') return planRpc(cat, req);
  try {
    return planRpc(cat, req);
  } catch (err) {
    // `token` in the query string marks a credential for caching (docs/api/rest.md); it is an
    // argument only for a function that takes one.
    const sp = new URLSearchParams(req.query);
    if (!(err instanceof AppError) || err.status !== 400 || !sp.has('token')) throw err;
    sp.delete('token');
    return planRpc(cat, { ...req, query: sp.toString() });
  }
}

/**
 * The statement of an edge function in plv8 (`public.<name>(jsonb)`, the payload as `$1`),
 * answered as RPC answers. Run it with `{ statement, params: [payload], offset: 0 }`.
 */
export function jsonCallStatement(name: string, fn: Pick<Func, 'returnsSet' | 'returnKind' | 'volatility'>): Statement {
  return build({ kind: 'call', call: jsonCall(name, fn), counted: false });
}
