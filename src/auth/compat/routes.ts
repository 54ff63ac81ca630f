/**
 * SUPABASE_COMPAT=true: auth as GoTrue answers it, for what auth-js sends (docs/api/supabase.md).
 * Registered before the interface's auth routes, and only under the setting:
 *
 * - hooks on existing routes (hooks.ts; an `onRoute` hook attaches them to those routes
 *   only): `grant_type` from the query of POST /token; POST /signup without an address is
 *   a guest sign-in; GET /verify with a `type` verifies and redirects with the session in
 *   the fragment; POST /recover honours `redirect_to`; POST /logout honours `scope`;
 *   sessions and users leave in GoTrue's shape;
 * - POST /auth/v1/otp and POST /auth/v1/verify are ../flows/otp.ts's, which answer both modes.
 * (PUT /auth/v1/user reaches PATCH's route: src/core/http.ts rewrites the method.)
 *
 * The state stays in SQL (sql/fixtures/auth/compat.sql and the one-time tokens).
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { compatContext } from './context.ts';
import { compatHooks, type HookStage } from './hooks.ts';

export function registerSupabaseCompat(app: FastifyInstance, deps: Deps): void {
  const hooks = compatHooks(compatContext(deps));
  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const m of methods) {
      const mine = hooks[`${m} ${route.url}`];
      if (mine === undefined) continue;
      const r = route as unknown as Record<string, unknown>;
      for (const [stage, fn] of Object.entries(mine) as [HookStage, unknown][]) {
        const existing = r[stage];
        // Before the route's own hooks of that stage: the compat answer comes first.
        r[stage] = existing === undefined ? [fn] : [fn, ...(Array.isArray(existing) ? (existing as unknown[]) : [existing])];
      }
    }
  });
}
