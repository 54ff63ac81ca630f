/**
 * What another protocol on the live engine (realtime/) sees of the LiveService, and what
 * the service asks of it: no import of the service itself, so the import graph keeps no circle.
 */
import type { FastifyRequest } from 'fastify';
import type { Credential } from '../core/credentials.ts';
import type { Hub } from './hub.ts';

/** Sockets of another protocol on the same engine: what they listen to and hold. */
export interface LiveTap {
  /** A group's message (`route`: routeOfGroup); true when the tap took it. */
  groupMessage(route: string, msg: object): boolean;
  /** A broadcast or presence event of `channel`. */
  event(channel: string, msg: unknown): void;
  /** The groups the tap's sockets are in (for the membership heartbeat). */
  groupIds(): Iterable<string>;
  /** The subscription `queryId` is broken (its table dropped, a column it needs gone): its sockets are told. */
  broken(queryId: string): void;
  /** This instance had been declared dead (or just started): its sockets' presence is announced again. */
  reannounce(): void;
  closeSockets(): Promise<void>;
}

/** The LiveService as a tap uses it. */
export interface LiveEngine {
  readonly hub: Hub;
  readonly instanceId: string;
  readonly bcChannel: string;
  readonly taps: LiveTap[];
  originAllowed(req: FastifyRequest): boolean;
  credential(req: FastifyRequest): Promise<Credential>;
}
