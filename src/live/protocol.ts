/**
 * The words of plinth's live socket protocol (docs/api/live.md): its limits, close codes,
 * subprotocols and refusals, and what an admitted upgrade carries to its socket.
 */
import type { Credential } from '../core/credentials.ts';
import { AppError } from '../core/errors.ts';

/** Seconds without a heartbeat after which an instance and its clients' presence expire. */
export const INSTANCE_TTL = 5;
/** Largest client frame accepted (a broadcast must also fit a NOTIFY payload). */
export const MAX_FRAME_BYTES = 64 * 1024;
/** Payload + channel bytes a broadcast may have: the NOTIFY envelope adds about 150. */
export const MAX_BROADCAST_BYTES = 7800;
/** The subprotocol a client offers and plinth echoes back. */
export const SUBPROTOCOL = 'plinth';
/** The prefix of the subprotocol entry that carries the token, base64url-encoded. */
export const BEARER_PROTOCOL_PREFIX = 'base64url.bearer.';
/** Close code of a socket whose credential expired or was replaced by one not valid for it. */
export const CLOSE_TOKEN_EXPIRED = 4001;
/** Close code of a socket whose subscription's query stopped working (after an `error` message). */
export const CLOSE_BROKEN = 4002;

export const LIVE_ERRORS = {
  subscriptionNotFound: () => new AppError(404, 'subscription not found'),
  authenticationRequired: () => new AppError(401, 'authentication required'),
  audience: () => new AppError(403, 'audience not satisfied'),
  origin: () => new AppError(403, 'origin not allowed'),
  perIp: () => new AppError(429, 'too many connections from this address'),
  total: () => new AppError(503, 'connection limit reached'),
  metadata: (cause?: unknown) => new AppError(503, 'subscription metadata unavailable', { cause }),
  broken: () => new AppError(410, 'subscription is broken'),
  tooManyGroups: () => new AppError(503, 'live query group limit reached'),
  tooLarge: () => new AppError(413, 'live query result too large'),
  notReadable: () => new AppError(403, 'permission denied for this live query'),
  upgradeRequired: () => new AppError(426, 'upgrade required', { headers: { upgrade: 'websocket' } }),
} as const;

/** What an admitted upgrade was let in with, for its socket. */
export interface Admission {
  cred: Credential;
  /** Where its messages come from (Hub routes). */
  route: string;
  /** The subscription's (or its group's) seq when it was let in. */
  seq: number;
  /** The group of an `as: subscriber` subscription. */
  groupId: string | null;
}
