/**
 * The REST area (docs/api/rest.md; docs/api/admin-and-sql.md for `/api/catalog/refresh`):
 * tables and views under /rest/v1/{table}, functions under /rest/v1/rpc/{name}, the batch,
 * the OpenAPI description and rls-debug.
 *
 * The path of a table request (docs/architecture.md draws it hop by hop): credentials →
 * parse (request.ts) → plan against the catalog in memory (plan.ts) → SQL built from the plan
 * tree (sql/build.ts; cached per catalog by shape, prepare.ts) → `db.withContext` (role and
 * claims, the statement: one round trip) → the JSON text PostgreSQL built, sent as is.
 *
 * The catalog reloads on NOTIFY `plinth_cache` / `rest` (sent by the DDL event trigger and
 * by /api/catalog/refresh, so every instance reloads); loads are coalesced and the new
 * catalog is swapped in whole.
 */
import type { Area, Deps } from '../core/area.ts';
import { pgErrorToAppError } from '../core/errors.ts';
import { Reloading } from '../core/reloading.ts';
import { Catalog, loadCatalog } from './catalog.ts';
import { routes } from './routes.ts';

/** The catalog holder: the current catalog, coalesced reloads, an atomic swap. */
export class SchemaCache extends Reloading<Catalog> {
  constructor(deps: Deps) {
    super(() => loadCatalog(deps.db.sql, { computedFields: deps.config.restComputedFields, aggregates: deps.config.restAggregatesEnabled }));
  }

  override get(): Catalog | Promise<Catalog> {
    return this.value ?? Promise.resolve(super.get()).catch((err: unknown) => {
      throw pgErrorToAppError(err);
    });
  }
}

export const restArea: Area = {
  name: 'rest',
  async register(app, deps) {
    const cache = new SchemaCache(deps);
    deps.db.onCacheReload('rest', () => cache.reload());
    // Load now so the first request does not wait; a database that is down at start is
    // retried by the first request (cache.get) instead of failing the start.
    await cache.reload().catch((err: unknown) => deps.log.warn({ err }, 'REST catalog not loaded at start'));

    await app.register(async (scope) => routes(scope, deps, cache));

    app.post('/api/catalog/refresh', { onRequest: deps.credentials.requireRole('service_role') }, async (_req, reply) => {
      try {
        await cache.reload();
        await deps.db.notifyCacheReload('rest');
      } catch (err) {
        throw pgErrorToAppError(err);
      }
      return reply.code(200).send({ ok: true });
    });
  },
};
