/** The WebSocket, live query and Realtime settings. */
import { ConfigError, bool, int, str, type Env } from './read.ts';

function liveChannel(env: Env): string {
  const v = str(env, 'LIVE_CHANNEL') ?? 'lqs';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(v)) throw new ConfigError('LIVE_CHANNEL', 'must be a lower-case identifier');
  return v;
}

export function liveSettings(env: Env) {
  return {
    requireAuthenticatedWs: bool(env, 'REQUIRE_AUTHENTICATED_WS', false),
    wsMaxConnections: int(env, 'WS_MAX_CONNECTIONS', 10000, 1),
    wsMaxConnectionsPerIp: int(env, 'WS_MAX_CONNECTIONS_PER_IP', 100, 1),
    wsPingInterval: int(env, 'WS_PING_INTERVAL', 30, 1, 3600),
    liveChannel: liveChannel(env),
    liveRerunMaxMs: int(env, 'LIVE_RERUN_MAX_MS', 20, 1, 60_000),
    liveMaxGroups: int(env, 'LIVE_MAX_GROUPS', 10_000, 1, 1_000_000),
    liveMaxRows: int(env, 'LIVE_MAX_ROWS', 10_000, 1, 10_000_000),
    realtimeMaxSubscriptions: int(env, 'REALTIME_MAX_SUBSCRIPTIONS', 100, 1, 100_000),
    realtimeMaxFilters: int(env, 'REALTIME_MAX_FILTERS', 10, 1, 1000),
    realtimeIdleMs: int(env, 'REALTIME_IDLE_MS', 30_000, 0, 86_400_000),
  };
}
