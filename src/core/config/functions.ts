/** The edge functions, webhooks and jobs settings. */
import { isIPv4, isIPv6 } from 'node:net';
import { resolve } from 'node:path';
import { ConfigError, bool, int, str, url, type Env } from './read.ts';

/** FUNCTIONS_ENV: comma-separated variable names; each maps to its value here (null when unset). */
function functionsEnv(env: Env): Readonly<Record<string, string | null>> {
  const out: Record<string, string | null> = {};
  for (const name of (str(env, 'FUNCTIONS_ENV') ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new ConfigError('FUNCTIONS_ENV', `has an invalid variable name "${name}"`);
    out[name] = env[name] ?? null;
  }
  return Object.freeze(out);
}

/**
 * One entry of Deno's `--allow-net` / `--deny-net` list: `host`, `host:port`, an IPv4
 * address or range (`169.254.0.0/16`) with an optional port, or `[IPv6]` with an optional port.
 */
function netEntry(value: string, name: string): string {
  const bad = () => new ConfigError(name, `has an invalid entry "${value}" (expected host, host:port, IPv4/prefix[:port] or [IPv6][:port])`);
  const v6 = /^\[([0-9A-Fa-f:.]+)\](?::(\d{1,5}))?$/.exec(value);
  const plain = /^([A-Za-z0-9_.-]+)(?:\/(\d{1,2}))?(?::(\d{1,5}))?$/.exec(value);
  const port = v6?.[2] ?? plain?.[3];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) throw bad();
  if (v6 !== null) {
    if (!isIPv6(v6[1])) throw bad();
    return value;
  }
  if (plain === null) throw bad();
  const [, host, prefix] = plain;
  if (prefix !== undefined && (!isIPv4(host) || Number(prefix) > 32)) throw bad();
  if (!isIPv4(host) && !/^[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*$/.test(host)) throw bad();
  return value;
}

/** A comma-separated list of net entries; `extra` are words accepted as they are (`*`, `none`). */
function netList(env: Env, name: string, extra: readonly string[] = []): string[] | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  const entries = v.split(',').map((s) => s.trim()).filter(Boolean);
  if (entries.length === 0) throw new ConfigError(name, 'has no entry');
  return entries.map((e) => (extra.includes(e) ? e : netEntry(e, name)));
}

/** FUNCTIONS_ALLOW_NET: unset → null (any host); `none` alone → no network; else the entries (`*`: any host). */
function functionsAllowNet(env: Env): readonly string[] | null {
  const list = netList(env, 'FUNCTIONS_ALLOW_NET', ['*', 'none']);
  if (list === undefined) return null;
  if (list.includes('none')) {
    if (list.length > 1) throw new ConfigError('FUNCTIONS_ALLOW_NET', 'may hold none only alone');
    return Object.freeze([]);
  }
  return Object.freeze(list);
}

/** EDGE_RUNTIME_SECRET: printable ASCII without spaces (it travels in a header), at least 32 characters. */
function edgeRuntimeSecret(env: Env): string | null {
  const v = str(env, 'EDGE_RUNTIME_SECRET');
  if (v === undefined) return null;
  if (!/^[\x21-\x7e]{32,}$/.test(v)) throw new ConfigError('EDGE_RUNTIME_SECRET', 'must be at least 32 printable ASCII characters without spaces');
  return v;
}

const RETRY_UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const RETRY_MAX_DELAYS = 20;
const RETRY_MAX_DELAY_MS = 24 * 3_600_000;

/**
 * WEBHOOK_RETRY_SCHEDULE: comma-separated delays (`1s,4s,1m,10m,1h`), each a whole number
 * with a unit (ms, s, m, h), at most 20 of them, each at most 24 h. Unset: the interface's
 * 1 s and 4 s (three attempts in all).
 */
function retrySchedule(env: Env): readonly number[] {
  const v = str(env, 'WEBHOOK_RETRY_SCHEDULE');
  if (v === undefined) return Object.freeze([1000, 4000]);
  const parts = v.split(',').map((p) => p.trim());
  const bad = () => new ConfigError('WEBHOOK_RETRY_SCHEDULE', `must be 1 to ${RETRY_MAX_DELAYS} comma-separated delays such as 1s,4s,1m,10m,1h (units ms, s, m, h; each at most 24h)`);
  if (parts.length > RETRY_MAX_DELAYS) throw bad();
  return Object.freeze(
    parts.map((p) => {
      const m = /^(\d{1,9})(ms|s|m|h)$/.exec(p);
      if (!m) throw bad();
      const ms = Number(m[1]) * RETRY_UNITS[m[2]];
      if (ms > RETRY_MAX_DELAY_MS) throw bad();
      return ms;
    }),
  );
}

export function functionsSettings(env: Env) {
  return {
    edgeRuntimeUrl: url(env, 'EDGE_RUNTIME_URL')?.replace(/\/$/, '') ?? null,
    functionsDir: resolve(str(env, 'FUNCTIONS_DIR') ?? './functions'),
    functionsTimeoutMs: int(env, 'FUNCTIONS_TIMEOUT_MS', 60000, 1),
    functionsEnv: functionsEnv(env),
    functionsAllowNet: functionsAllowNet(env),
    functionsDenyNet: Object.freeze(netList(env, 'FUNCTIONS_DENY_NET') ?? []),
    edgeRuntimeSecret: edgeRuntimeSecret(env),
    functionsMemoryMb: int(env, 'FUNCTIONS_MEMORY_MB', 256, 16, 65536),
  };
}

export function webhookSettings(env: Env) {
  return {
    webhookTimeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 10000, 1),
    webhookDenyPrivate: bool(env, 'WEBHOOK_DENY_PRIVATE', false),
    webhookRetryScheduleMs: retrySchedule(env),
    jobRunRetentionDays: int(env, 'JOB_RUN_RETENTION_DAYS', 14, 1, 3650),
  };
}
