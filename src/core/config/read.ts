/**
 * Reading one setting: the environment's words turned into typed values, or a `ConfigError`
 * naming the variable. The readers of each area (auth.ts, database.ts, …) and `parseConfig`
 * (../config.ts) are built from these.
 */
import { statSync } from 'node:fs';

export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`invalid configuration: ${variable} ${problem}`);
    this.variable = variable;
  }
}

export type Env = Record<string, string | undefined>;

export function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

export function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

export function bool(env: Env, name: string, dflt: boolean): boolean {
  const v = str(env, name);
  if (v === undefined) return dflt;
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw new ConfigError(name, 'must be exactly true or false');
}

export function int(env: Env, name: string, dflt: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const v = str(env, name);
  if (v === undefined) return dflt;
  if (!/^\d+$/.test(v)) throw new ConfigError(name, `must be a whole number from ${min}`);
  const n = Number(v);
  if (n < min || n > max) throw new ConfigError(name, `must be a whole number from ${min} to ${max}`);
  return n;
}

function isLoopbackHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

export function url(env: Env, name: string, opts: { protocols?: string[]; httpOnlyLoopback?: boolean } = {}): string | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(name, 'is not a valid URL');
  }
  const protocols = opts.protocols ?? ['http:', 'https:'];
  if (!protocols.includes(u.protocol)) throw new ConfigError(name, `must use ${protocols.map((p) => p.slice(0, -1)).join(' or ')}`);
  if (opts.httpOnlyLoopback && u.protocol === 'http:' && !isLoopbackHost(u.hostname)) {
    throw new ConfigError(name, 'may use http:// only for loopback hosts');
  }
  return v;
}

/** A comma-separated list, trimmed, empty entries dropped. */
export function list(env: Env, name: string): string[] {
  return (str(env, name) ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}
