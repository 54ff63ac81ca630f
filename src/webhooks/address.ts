/**
 * Where webhook deliveries may go (docs/api/webhooks.md, docs/security.md):
 *
 * - never to a link-local address, `169.254.0.0/16` and `fe80::/10`, where cloud metadata
 *   services answer (with AWS's IPv6 `fd00:ec2::254`, and these as IPv4-mapped or NAT64
 *   IPv6);
 * - with WEBHOOK_DENY_PRIVATE=true, neither to loopback, private nor "this network"
 *   addresses: `0.0.0.0/8`, `10.0.0.0/8`, `100.64.0.0/10`, `127.0.0.0/8`, `172.16.0.0/12`,
 *   `192.168.0.0/16`, `::`, `::1`, `fc00::/7`, `fec0::/10` (off by default: self-hosted
 *   receivers often live on the private network).
 *
 * Checked where the connection is made, after DNS: a literal address before the request,
 * a name in the socket's `lookup` (every address it resolves to must pass, so a name that
 * resolves to a refused address is refused before any packet is sent, whatever it resolved
 * to when the webhook was registered). Registration refuses a literal address at once.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOptions } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

const LINK_LOCAL = new BlockList();
LINK_LOCAL.addSubnet('169.254.0.0', 16, 'ipv4');
LINK_LOCAL.addSubnet('fe80::', 10, 'ipv6');
LINK_LOCAL.addAddress('fd00:ec2::254', 'ipv6');
LINK_LOCAL.addSubnet('64:ff9b::a9fe:0', 112, 'ipv6');

const PRIVATE = new BlockList();
for (const [net, bits] of [['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['172.16.0.0', 12], ['192.168.0.0', 16]] as const) {
  PRIVATE.addSubnet(net, bits, 'ipv4');
}
for (const [net, bits] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fec0::', 10], ['64:ff9b::', 104], ['64:ff9b::a00:0', 104], ['64:ff9b::7f00:0', 104], ['64:ff9b::ac10:0', 108], ['64:ff9b::c0a8:0', 112]] as const) {
  PRIVATE.addSubnet(net, bits, 'ipv6');
}

/** Why an address is refused: `link-local`, `private` (loopback and private ranges, with denyPrivate), or null. */
export function refusal(address: string, denyPrivate: boolean): 'link-local' | 'private' | null {
  const a = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const family = isIP(a);
  if (family === 0) return null;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (LINK_LOCAL.check(a, type)) return 'link-local';
  if (denyPrivate && PRIVATE.check(a, type)) return 'private';
  return null;
}

const WHAT = { 'link-local': 'a link-local address', private: 'a loopback or private address (WEBHOOK_DENY_PRIVATE)' } as const;

/** The error an attempt to a refused address fails with; its message is what the delivery log shows. */
export class RefusedAddress extends Error {
  constructor(host: string, address: string, why: 'link-local' | 'private') {
    const a = address.replace(/^\[|\]$/g, '');
    super(host.replace(/^\[|\]$/g, '') === a ? `refused: ${a} is ${WHAT[why]}` : `refused: ${host} resolves to ${a}, ${WHAT[why]}`);
    this.name = 'RefusedAddress';
  }
}

type BaseLookup = (hostname: string, options: LookupAllOptions, callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void) => void;

export interface AddressGuard {
  /** The refusal of a URL's host when it is a literal address (null: a name, or allowed). */
  literal(hostname: string): RefusedAddress | null;
  /** A socket `lookup` that fails with RefusedAddress when any address of the name is refused. */
  lookup: LookupFunction;
}

/** The guard of WEBHOOK_DENY_PRIVATE; `base` resolves names (dns.lookup; tests give their own). */
export function addressGuard(denyPrivate: boolean, base: BaseLookup = dnsLookup): AddressGuard {
  const lookup = ((hostname: string, given: LookupOptions | number | undefined, callback: (...args: unknown[]) => void) => {
    const options: LookupOptions = typeof given === 'object' && given !== null ? given : typeof given === 'number' ? { family: given } : {};
    base(hostname, { ...options, all: true }, (err, addresses) => {
      if (err !== null) return callback(err, options.all === true ? [] : undefined);
      for (const a of addresses) {
        const why = refusal(a.address, denyPrivate);
        if (why !== null) return callback(new RefusedAddress(hostname, a.address, why), options.all === true ? [] : undefined);
      }
      if (options.all === true) return callback(null, addresses);
      if (addresses.length === 0) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }));
      return callback(null, addresses[0].address, addresses[0].family);
    });
  }) as LookupFunction;
  return {
    literal(hostname) {
      const why = refusal(hostname, denyPrivate);
      return why === null ? null : new RefusedAddress(hostname, hostname, why);
    },
    lookup,
  };
}
