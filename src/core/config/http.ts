/** The HTTP settings: where plinth listens and is reached, origins, proxies, body limits. */
import { isIP } from 'node:net';
import { ConfigError, bool, int, list, str, url, type Env } from './read.ts';

/**
 * TRUST_PROXY, in the forms fastify's `trustProxy` takes: false (the socket's address is
 * the client), true (every hop is trusted: the left-most X-Forwarded-For entry is the
 * client), a number of proxies in front of plinth (the socket and the right-most n - 1
 * entries are trusted), or the proxies' addresses and CIDR ranges (and proxy-addr's
 * names `loopback`, `linklocal`, `uniquelocal`). The client is the right-most hop not
 * trusted.
 */
export type TrustProxy = boolean | number | readonly string[];

function origin(value: string, name: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new ConfigError(name, `has an invalid origin "${value}"`);
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.origin !== value.replace(/\/$/, '')) {
    throw new ConfigError(name, `has an invalid origin "${value}" (expected scheme://host[:port])`);
  }
  return u.origin;
}

const TRUST_PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);
const MAX_PROXY_HOPS = 100;

/** One entry of a TRUST_PROXY list: an IP address, an address/prefix, or a proxy-addr name. */
function trustedProxyEntry(entry: string): boolean {
  if (TRUST_PROXY_NAMES.has(entry)) return true;
  const slash = entry.indexOf('/');
  const addr = slash < 0 ? entry : entry.slice(0, slash);
  // Zone ids (fe80::1%eth0) are left out: the address never carries one in X-Forwarded-For.
  const kind = addr.includes('%') ? 0 : isIP(addr);
  if (kind === 0) return false;
  if (slash < 0) return true;
  const prefix = entry.slice(slash + 1);
  return /^\d{1,3}$/.test(prefix) && Number(prefix) >= 1 && Number(prefix) <= (kind === 4 ? 32 : 128);
}

/** TRUST_PROXY: true | false | a number of proxies | comma-separated proxy addresses or CIDR ranges. */
function trustProxy(env: Env): TrustProxy {
  const v = str(env, 'TRUST_PROXY')?.trim();
  if (v === undefined || v === '' || v === 'false') return false;
  if (v === 'true') return true;
  if (/^\d+$/.test(v)) {
    const n = Number(v);
    if (n > MAX_PROXY_HOPS) throw new ConfigError('TRUST_PROXY', `must be true, false, a number of proxies from 0 to ${MAX_PROXY_HOPS}, or proxy addresses`);
    return n === 0 ? false : n;
  }
  const entries = v.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = entries.find((e) => !trustedProxyEntry(e));
  if (bad !== undefined || entries.length === 0) {
    throw new ConfigError(
      'TRUST_PROXY',
      `has an invalid proxy address "${bad ?? v}" (expected true, false, a number of proxies, or comma-separated IP addresses and CIDR ranges)`,
    );
  }
  return Object.freeze(entries);
}

export function httpSettings(env: Env) {
  const host = str(env, 'HOST') ?? '127.0.0.1';
  const port = int(env, 'PORT', 8000, 0, 65535);
  const publicHost = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  return {
    siteUrl: (url(env, 'SITE_URL') ?? 'http://localhost:3000').replace(/\/$/, ''),
    host,
    port,
    apiExternalUrl: (url(env, 'API_EXTERNAL_URL') ?? `http://${publicHost}:${port}`).replace(/\/$/, ''),
    allowedOrigins: Object.freeze(list(env, 'ALLOWED_ORIGINS').map((o) => origin(o, 'ALLOWED_ORIGINS'))),
    allowPermissiveCors: bool(env, 'ALLOW_PERMISSIVE_CORS', false),
    trustProxy: trustProxy(env),
    maxBodyBytes: int(env, 'MAX_BODY_BYTES', 1048576, 1),
    maxJsonDepth: int(env, 'MAX_JSON_DEPTH', 128, 1, 1000),
  };
}
