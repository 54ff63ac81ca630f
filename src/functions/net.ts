/**
 * The network the bundled runtime's functions may reach: Deno's `--allow-net` and
 * `--deny-net` (a denial always wins in Deno).
 *
 * Denied by default:
 * - every database plinth is given (each host:port of DATABASE_URL, DATABASE_DIRECT_URL,
 *   DATABASE_READ_URL, ROOT_DATABASE_URL, SHADOW_DATABASE_URL, and the embedded one),
 *   plinth's own listening port(s) and its METRICS_PORT listener;
 * - for such a port on this machine, every spelling that reaches it: `127.0.0.0/8`,
 *   `0.0.0.0`, `[::1]`, `[::]`, `localhost` and each address of the machine's interfaces;
 *   for a database elsewhere, its host name and the addresses it resolves to;
 * - link-local addresses, where cloud metadata services answer: `169.254.0.0/16` and AWS's
 *   IPv6 `[fd00:ec2::254]`. Deno (2.9) takes IPv4 ranges but no IPv6 range, so the rest
 *   of `fe80::/10` is not denied.
 *
 * Deno checks a denial against the address a name resolves to as well as the name, so an
 * address denial also covers DNS names pointing at it; a name denial covers only that name.
 *
 * FUNCTIONS_ALLOW_NET (unset: any host) narrows what is allowed (the runtime's own listening
 * socket, `127.0.0.1:0`, is always added); an entry of it that names a denied target
 * (`localhost:8000`) lifts that target's default denials, to let functions call plinth's
 * own API on purpose, say. FUNCTIONS_DENY_NET adds denials that nothing lifts.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';

/** What the runtime itself needs when the allowed network is a list: to listen on a loopback port (port 0: any free one). */
const RUNTIME_LISTEN = '127.0.0.1:0';

export const LINK_LOCAL_DENIALS: readonly string[] = ['169.254.0.0/16', '[fd00:ec2::254]'];

/** A host (name or address) as Deno's net flags write it: IPv6 in brackets. */
function hostEntry(host: string): string {
  const h = host.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  return isIP(h) === 6 ? `[${h}]` : h;
}

/** The addresses of this machine's interfaces (loopback included), without zone ids. */
function localAddresses(): string[] {
  const out: string[] = [];
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) out.push(a.address.replace(/%.*$/, ''));
  return out;
}

function isLocal(host: string, local: ReadonlySet<string>): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '0.0.0.0' || h === '::' || h === '::1' || /^127\./.test(h) || local.has(h);
}

/** Every spelling Deno tells apart that reaches `port` on this machine. */
function localDenials(port: number, local: readonly string[]): string[] {
  const out = [`127.0.0.0/8:${port}`, `0.0.0.0:${port}`, `[::1]:${port}`, `[::]:${port}`, `localhost:${port}`];
  for (const a of local) if (!/^127\./.test(a) && a !== '::1') out.push(`${hostEntry(a)}:${port}`);
  return out;
}

export interface Target {
  host: string;
  port: number;
}

const PG_PORT = 5432;

function decoded(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * The host:port pairs a PostgreSQL URL names, as libpq reads them: each host of the
 * authority (`postgres://u:p@h1:5432,[::1]:5433/db`; none: `localhost`), and the hosts of a
 * `host=` parameter with the ports of a `port=` one. Unix socket paths are left out.
 */
export function postgresTargets(url: string): Target[] {
  const m = /^[a-z][a-z0-9+.-]*:\/\/([^/?#]*)([^?#]*)(\?[^#]*)?/i.exec(url);
  if (m === null) return [];
  const out: Target[] = [];
  const add = (host: string, port: number) => {
    const h = decoded(host).replace(/^\[|\]$/g, '');
    if (h.startsWith('/') || !Number.isInteger(port) || port <= 0 || port > 65535) return;
    if (!out.some((t) => t.host === h && t.port === port)) out.push({ host: h, port });
  };
  const authority = m[1].slice(m[1].lastIndexOf('@') + 1);
  for (const part of authority.split(',')) {
    const hp = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(part);
    if (hp !== null) add(hp[1] === '' ? 'localhost' : hp[1], hp[2] ? Number(hp[2]) : PG_PORT);
  }
  const params = new URLSearchParams((m[3] ?? '').slice(1));
  const hosts = params.get('host')?.split(',') ?? [];
  const ports = (params.get('port') ?? '').split(',').map((p) => (p.trim() === '' ? NaN : Number(p)));
  hosts.forEach((h, i) => add(h.trim() || 'localhost', ports[i] ?? ports[0] ?? out[0]?.port ?? PG_PORT));
  // A `port=` alone names the authority's hosts' port (both are denied: more is harmless).
  if (hosts.length === 0 && Number.isInteger(ports[0])) for (const t of [...out]) add(t.host, ports[0]);
  return out;
}

/**
 * The databases' host:port pairs, resolved once: a host on this machine becomes its port
 * (every local spelling is denied), another one its name and addresses. A name that does
 * not resolve in `timeoutMs` is denied by name only.
 */
export async function databaseTargets(targets: readonly Target[], timeoutMs = 2000): Promise<Target[]> {
  const given: Target[] = [];
  for (const t of targets) {
    // A Unix socket: functions have no file access to it.
    if (t.host !== '' && !t.host.startsWith('/') && !given.some((g) => g.host === t.host && g.port === t.port)) given.push(t);
  }
  const resolved = await Promise.all(
    given.map(async ({ host, port }): Promise<Target[]> => {
      if (isIP(host.replace(/^\[|\]$/g, '')) !== 0 || host.toLowerCase() === 'localhost') return [];
      let timer: NodeJS.Timeout | undefined;
      const addresses = await Promise.race([
        lookup(host, { all: true }).catch(() => []),
        new Promise<[]>((resolve) => {
          timer = setTimeout(() => resolve([]), timeoutMs);
        }),
      ]);
      clearTimeout(timer);
      return addresses.map((a) => ({ host: a.address, port }));
    }),
  );
  return [...given, ...resolved.flat()];
}

export interface NetPolicy {
  /** FUNCTIONS_ALLOW_NET: null for any host; `*` among the entries means any host too. */
  allow: readonly string[] | null;
  /** FUNCTIONS_DENY_NET. */
  deny: readonly string[];
}

/** The host and port of an allow entry that names both (`host:port`, `[v6]:port`; not a range). */
function entryTarget(entry: string): Target | null {
  const m = /^(\[[^\]]+\]|[^:/[\]]+):(\d+)$/.exec(entry);
  return m === null ? null : { host: m[1].replace(/^\[|\]$/g, '').toLowerCase(), port: Number(m[2]) };
}

/**
 * Deno's net flags for the bundled runtime: plinth's listening ports and the database
 * targets are denied in every spelling, link-local addresses too, then FUNCTIONS_DENY_NET.
 * An allow entry `host:port` that names a denied target lifts its default denials: a local
 * spelling (`localhost:8000`) for a port on this machine, the database's host (name or
 * address) for a database elsewhere.
 */
export function netFlags(policy: NetPolicy, plinthPorts: readonly number[], database: readonly Target[], local: readonly string[] = localAddresses()): string[] {
  const localSet = new Set(local.map((a) => a.toLowerCase()));
  const named = (policy.allow ?? []).map(entryTarget).filter((e): e is Target => e !== null);
  const liftedLocal = new Set(named.filter((e) => isLocal(e.host, localSet)).map((e) => e.port));
  const remote = database.filter((t) => !isLocal(t.host, localSet));
  const liftedRemote = new Set(named.filter((e) => remote.some((t) => t.port === e.port && hostEntry(t.host).replace(/^\[|\]$/g, '').toLowerCase() === e.host)).map((e) => e.port));
  const deny: string[] = [];
  const add = (entry: string) => {
    if (!deny.includes(entry)) deny.push(entry);
  };
  for (const port of plinthPorts) if (!liftedLocal.has(port)) localDenials(port, local).forEach(add);
  for (const t of database) {
    if (isLocal(t.host, localSet)) {
      if (!liftedLocal.has(t.port)) localDenials(t.port, local).forEach(add);
    } else if (!liftedRemote.has(t.port)) {
      add(`${hostEntry(t.host)}:${t.port}`);
    }
  }
  LINK_LOCAL_DENIALS.forEach(add);
  policy.deny.forEach(add);

  const allow = policy.allow;
  const flags: string[] = [];
  if (allow === null || allow.includes('*')) flags.push('--allow-net');
  // A list: those, and the runtime's own listening socket (a loopback port of the system's choice).
  else flags.push(`--allow-net=${[RUNTIME_LISTEN, ...allow].join(',')}`);
  if (deny.length > 0) flags.push(`--deny-net=${deny.join(',')}`);
  return flags;
}
