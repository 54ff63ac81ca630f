/**
 * Which REST reads a replica may serve (docs/api/rest.md, "Read replicas"), and the mark a
 * write leaves so that its client reads from the primary for READ_YOUR_WRITES_MS: the time
 * of the write (ms since the epoch), answered in the `Plinth-Wrote` header and a cookie of
 * the same name; the client library sends the header back, a browser the cookie.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Prefer } from './prefer.ts';

export const WROTE_HEADER = 'plinth-wrote';
const WROTE_COOKIE = 'plinth_wrote';
const COOKIE_RE = /(?:^|;\s*)plinth_wrote=(\d{1,16})(?:;|$)/;

/** When this client last wrote, by its header or cookie (ms since the epoch); 0: not known. */
function wroteAt(req: FastifyRequest): number {
  const h = req.headers[WROTE_HEADER];
  const v = typeof h === 'string' && /^\d{1,16}$/.test(h.trim()) ? Number(h.trim()) : 0;
  const m = typeof req.headers.cookie === 'string' ? COOKIE_RE.exec(req.headers.cookie) : null;
  return Math.max(v, m ? Number(m[1]) : 0);
}

/**
 * true: a replica may serve this read — not under `Prefer: consistency=strong`, and not for
 * a client that wrote within `windowMs`.
 */
export function replicaMayRead(req: FastifyRequest, prefer: Prefer, windowMs: number): boolean {
  if (prefer.strong) return false;
  return Date.now() - wroteAt(req) >= windowMs;
}

/** The write's mark: its time, in the header and the cookie (for `windowMs`). */
export function markWrite(reply: FastifyReply, windowMs: number): void {
  if (windowMs <= 0) return;
  const now = String(Date.now());
  reply.header(WROTE_HEADER, now);
  reply.header('set-cookie', `${WROTE_COOKIE}=${now}; Path=/; Max-Age=${Math.ceil(windowMs / 1000)}; HttpOnly; SameSite=Lax`);
}
