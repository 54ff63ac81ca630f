/**
 * The credential an upgrade presents (docs/api/live.md): `Authorization: Bearer`, then the
 * `Sec-WebSocket-Protocol` entry `base64url.bearer.<token, base64url>` (the way a browser
 * can send a token without putting it in the URL, as Kubernetes does), then `?token=`, the
 * `token` cookie, `apikey`, `?apikey=`.
 */
import type { FastifyRequest } from 'fastify';
import type { Deps } from '../core/area.ts';
import type { Credential } from '../core/credentials.ts';
import { ERRORS } from '../core/errors.ts';
import { BEARER_PROTOCOL_PREFIX } from './protocol.ts';

function queryParam(req: FastifyRequest, name: string): string | undefined {
  const v = (req.query as Record<string, unknown> | undefined)?.[name];
  if (Array.isArray(v)) return typeof v[0] === 'string' ? v[0] : undefined;
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/**
 * The token of a `base64url.bearer.<token>` entry of Sec-WebSocket-Protocol; undefined
 * when there is none. An entry that is not base64url is an invalid token.
 */
function protocolToken(req: FastifyRequest): string | undefined {
  const header = req.headers['sec-websocket-protocol'];
  if (typeof header !== 'string') return undefined;
  for (const entry of header.split(',')) {
    const p = entry.trim();
    if (!p.startsWith(BEARER_PROTOCOL_PREFIX)) continue;
    const encoded = p.slice(BEARER_PROTOCOL_PREFIX.length);
    if (!/^[A-Za-z0-9_-]+$/.test(encoded)) throw ERRORS.invalidToken();
    return Buffer.from(encoded, 'base64url').toString('utf8');
  }
  return undefined;
}

function cookie(req: FastifyRequest, name: string): string | undefined {
  const raw = req.headers.cookie;
  if (typeof raw !== 'string') return undefined;
  for (const part of raw.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) {
      const v = part.slice(i + 1).trim();
      try {
        return v === '' ? undefined : decodeURIComponent(v);
      } catch {
        return v;
      }
    }
  }
  return undefined;
}

/** The credential presented: Bearer, the bearer subprotocol, ?token=, the token cookie, apikey, ?apikey=. */
export async function presentedCredential(deps: Deps, req: FastifyRequest): Promise<Credential> {
  const { credentials, config } = deps;
  const auth = req.headers.authorization;
  if (auth !== undefined && auth !== '') return (await credentials.fromHeaders(req.headers))!;
  const token = protocolToken(req) ?? queryParam(req, 'token') ?? cookie(req, 'token');
  if (token !== undefined) return credentials.verify(token);
  const headerKey = req.headers.apikey;
  const apikey = typeof headerKey === 'string' && headerKey !== '' ? headerKey : queryParam(req, 'apikey');
  if (apikey !== undefined) {
    const cred = await credentials.verify(apikey);
    if (cred.role === 'anon' || cred.role === 'service_role') return cred;
    throw ERRORS.invalidToken();
  }
  if (config.devMode) return credentials.anonymous;
  throw ERRORS.missingCredentials();
}
