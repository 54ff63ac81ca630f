/**
 * Readiness (`GET /ready`): whether this instance should be sent traffic. It is ready when
 * every named check passes; the answer names the first that fails. Liveness is `/health`.
 *
 * Checks are registered per service instance: the health area adds "draining" and
 * "database"; another part of plinth adds its own (`addReadinessCheck(app, 'connections',
 * …)`) where it can tell that requests would not get a connection.
 */
import type { FastifyInstance } from 'fastify';

/** null: ready as far as this check knows; a string: the reason it is not. */
export type ReadinessCheck = () => string | null | Promise<string | null>;

const checks = new WeakMap<FastifyInstance, Map<string, ReadinessCheck>>();

/** Add (or replace) the check `name` of this service instance. */
export function addReadinessCheck(app: FastifyInstance, name: string, check: ReadinessCheck): void {
  let m = checks.get(app);
  if (!m) checks.set(app, (m = new Map<string, ReadinessCheck>()));
  m.set(name, check);
}

export interface Readiness {
  ready: boolean;
  /** The first failing check's reason (null when ready). */
  reason: string | null;
  /** Every check, by name: `ok` or its reason. */
  checks: Record<string, string>;
}

/** Run every check of this instance, side by side. A check that throws fails with its message. */
export async function readiness(app: FastifyInstance): Promise<Readiness> {
  const entries = [...(checks.get(app) ?? new Map<string, ReadinessCheck>())];
  const results = await Promise.all(
    entries.map(async ([name, check]) => {
      try {
        return [name, (await check()) ?? 'ok'] as const;
      } catch (err) {
        return [name, err instanceof Error ? err.message : String(err)] as const;
      }
    }),
  );
  const failing = results.find(([, r]) => r !== 'ok');
  return { ready: failing === undefined, reason: failing ? failing[1] : null, checks: Object.fromEntries(results) };
}
