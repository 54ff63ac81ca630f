/**
 * One joined channel of a /realtime/v1 socket (docs/api/realtime.md): its credential (the
 * join's `access_token`, swapped by `access_token` pushes, closed at its `exp`), its table
 * subscriptions (each in the group of its role and claims, with its event and filter), and
 * its broadcast and presence, which are plinth's channels of the same name.
 */
import { randomUUID } from 'node:crypto';
import type { Credential } from '../../core/credentials.ts';
import type { Condition } from './filter.ts';

/** A table subscription of a channel: the group route it listens on, its event and filter. */
export interface TableSub {
  id: number;
  channel: JoinedChannel;
  route: string;
  groupId: string;
  queryId: string;
  table: string;
  event: 'INSERT' | 'UPDATE' | 'DELETE' | '*';
  conditions: Condition[];
  /** What it may want, for the database's match (filter.ts wantOf). */
  want: object;
  pk: string[];
}

export interface JoinedChannel {
  /** `realtime:<name>`, as the client names it. */
  topic: string;
  /** The channel's name: plinth's broadcast and presence channel. */
  name: string;
  joinRef: string | null;
  cred: Credential;
  /** This channel's id in broadcast (`from`). */
  clientId: string;
  /** Its presence id: `<key>#<client id>`, or the client id when the key is empty. */
  presenceId: string;
  presenceEnabled: boolean;
  self: boolean;
  ack: boolean;
  subs: TableSub[];
  /** Whether it sent presence (a leave is due when it goes). */
  tracked: boolean;
  /** The state it last tracked (JSON), announced again after this instance was declared dead. */
  trackedState: string;
  expiry: NodeJS.Timeout | null;
  /** Database work of this channel (broadcast, presence), in order. */
  queue: Promise<void>;
}

export function newChannel(topic: string, joinRef: string | null, cred: Credential, config: Record<string, unknown>): JoinedChannel {
  const broadcast = (config.broadcast ?? {}) as { self?: unknown; ack?: unknown };
  const presence = (config.presence ?? {}) as { key?: unknown; enabled?: unknown };
  const clientId = randomUUID();
  const key = typeof presence.key === 'string' ? presence.key.replace(/#/g, '') : '';
  return {
    topic,
    name: topic.startsWith('realtime:') ? topic.slice('realtime:'.length) : topic,
    joinRef,
    cred,
    clientId,
    presenceId: key === '' ? clientId : `${key}#${clientId}`,
    presenceEnabled: presence.enabled === true,
    self: broadcast.self === true,
    ack: broadcast.ack === true,
    subs: [],
    tracked: false,
    trackedState: '{}',
    expiry: null,
    queue: Promise.resolve(),
  };
}

/** A presence id as Phoenix presence reads it: its key and its ref. */
export function presenceKey(id: string): { key: string; ref: string } {
  const i = id.lastIndexOf('#');
  return i < 0 ? { key: id, ref: id } : { key: id.slice(0, i), ref: id.slice(i + 1) };
}

/** plinth's presence list (`{id: state}`) as Phoenix's presence_state (`{key: {metas: [...]}}`). */
export function presenceState(list: Record<string, unknown>): Record<string, { metas: object[] }> {
  const out: Record<string, { metas: object[] }> = {};
  for (const [id, state] of Object.entries(list)) {
    const { key, ref } = presenceKey(id);
    (out[key] ??= { metas: [] }).metas.push({ ...(state !== null && typeof state === 'object' ? state : { state }), phx_ref: ref });
  }
  return out;
}

/** A plinth presence event as a Phoenix presence_diff. */
export function presenceDiff(msg: { type?: unknown; client_id?: unknown; state?: unknown }): object | null {
  if (typeof msg.client_id !== 'string') return null;
  const { key, ref } = presenceKey(msg.client_id);
  if (msg.type === 'presence_leave') return { joins: {}, leaves: { [key]: { metas: [{ phx_ref: ref }] } } };
  if (msg.type === 'presence_join' || msg.type === 'presence_state') {
    const state = msg.state !== null && typeof msg.state === 'object' ? msg.state : { state: msg.state };
    return { joins: { [key]: { metas: [{ ...state, phx_ref: ref }] } }, leaves: {} };
  }
  return null;
}

/** A plinth broadcast payload as Supabase's event and payload: `{event, payload}` as it is, anything else as event `message`. */
export function broadcastParts(payload: unknown): { event: string; payload: unknown } {
  if (payload !== null && typeof payload === 'object' && !Array.isArray(payload)) {
    const p = payload as { event?: unknown; payload?: unknown };
    if (typeof p.event === 'string' && 'payload' in p) return { event: p.event, payload: p.payload };
  }
  return { event: 'message', payload };
}

/** The primary key's columns of a row (what a DELETE, and an UPDATE's old row, carry). */
export function keyOf(row: Record<string, unknown> | null | undefined, pk: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (row === null || row === undefined) return out;
  for (const c of pk) if (c in row) out[c] = row[c];
  return out;
}
