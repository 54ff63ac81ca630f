/** The REST, batch and SQL endpoint settings. */
import { ConfigError, bool, int, str, type Env } from './read.ts';

export const REST_TX_ENDS = ['commit', 'commit-allow-override', 'rollback', 'rollback-allow-override'] as const;
export type RestTxEnd = (typeof REST_TX_ENDS)[number];

function restTxEnd(env: Env): RestTxEnd {
  const v = str(env, 'REST_TX_END') ?? 'commit';
  const found = REST_TX_ENDS.find((x) => x === v);
  if (found === undefined) throw new ConfigError('REST_TX_END', `must be one of ${REST_TX_ENDS.join(', ')}`);
  return found;
}

export function restSettings(env: Env, jwtSecret: string | null) {
  return {
    maxBatchOperations: int(env, 'MAX_BATCH_OPERATIONS', 20, 1),
    restTxEnd: restTxEnd(env),
    restComputedFields: bool(env, 'REST_COMPUTED_FIELDS', false),
    restPlanEnabled: bool(env, 'REST_PLAN_ENABLED', false),
    restAggregatesEnabled: bool(env, 'REST_AGGREGATES_ENABLED', false),
    // On in development mode: the dashboard's SQL view is how a machine with only Node runs SQL.
    enableSqlEndpoint: bool(env, 'ENABLE_SQL_ENDPOINT', jwtSecret === null),
    enableDemoEndpoint: bool(env, 'ENABLE_DEMO_ENDPOINT', false),
  };
}
