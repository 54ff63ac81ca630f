/**
 * One socket of plinth's live protocol (docs/api/live.md), from `subscribed` to its close:
 * its credential's deadline (4001 at `exp`, moved by `{type: auth}`), `{type: snapshot}`
 * answered with the stored result, broadcasts (batched behind the client's queue) and
 * presence, and the presence leave when it goes.
 *
 * The socket knows the service only as a `SocketHost` (no import of the service), so the
 * import graph keeps no circle.
 */
import type { WebSocket } from 'ws';
import type { Credential } from '../core/credentials.ts';
import type { Sql } from '../core/db.ts';
import * as q from './db.ts';
import type { Client, Hub } from './hub.ts';
import { CLOSE_TOKEN_EXPIRED, MAX_BROADCAST_BYTES, type Admission } from './protocol.ts';

/** setTimeout's longest delay; a later deadline (the anon key lives ten years) is re-armed. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** What a socket asks of the service. */
export interface SocketHost {
  readonly hub: Hub;
  readonly sql: Sql;
  readonly bcChannel: string;
  /** The admitted group is now held by a socket (no longer pending). */
  groupConnected(groupId: string): void;
  /** The verdict on an `auth` message (LiveService.reauthenticate). */
  reauthenticate(channel: string, current: Credential, token: string, groupId: string | null): Promise<Credential | null | 'unavailable'>;
  sendSnapshot(client: Client, groupId: string | null): Promise<void>;
  /** Database work of one client, in order; a failure drops that message only. */
  enqueue(client: Client, work: () => Promise<void>): void;
  presence(client: Client, state: string): void;
  /** A presence leave that could not reach the database, for the heartbeat to retry. */
  leaveLater(leave: () => Promise<void>): void;
}

type Message = { type?: unknown; payload?: unknown; state?: unknown; token?: unknown };

export class LiveSocket {
  private readonly host: SocketHost;
  private readonly ws: WebSocket;
  private readonly channel: string;
  private readonly groupId: string | null;
  private readonly client: Client;
  /** The socket lives as long as this credential: closed with 4001 at its `exp`. */
  private current: Credential;
  private expiry: NodeJS.Timeout | null = null;
  private authRunning = false;
  private authPending: string | null = null;
  private snapshotRunning = false;
  private snapshotAgain = false;

  /** A new socket on `channel`, let in as `admission` says. */
  constructor(host: SocketHost, ws: WebSocket, channel: string, admission: Admission) {
    this.host = host;
    this.ws = ws;
    this.channel = channel;
    this.groupId = admission.groupId;
    this.current = admission.cred;
    this.client = host.hub.add(channel, ws, admission.route, admission.seq);
    if (admission.groupId !== null) host.groupConnected(admission.groupId);
    this.arm();
    ws.on('pong', () => {
      this.client.alive = true;
    });
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      let msg: Message;
      try {
        msg = JSON.parse(Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]).toString('utf8')) as Message;
      } catch {
        return;
      }
      if (msg === null || typeof msg !== 'object') return;
      this.onMessage(msg);
    });
    ws.on('close', () => this.onClose());
    // `snapshot: true`: this service answers `{type: snapshot}` with the stored result (decision 0300).
    host.hub.send(this.client, JSON.stringify({ type: 'subscribed', query_id: channel, client_id: this.client.id, snapshot: true }));
  }

  /** The close at the current credential's `exp`. */
  private arm(): void {
    if (this.expiry !== null) clearTimeout(this.expiry);
    this.expiry = null;
    if (!Number.isFinite(this.current.exp)) return;
    const ms = this.current.exp * 1000 - Date.now();
    if (ms <= 0) {
      this.ws.close(CLOSE_TOKEN_EXPIRED, 'token expired');
      return;
    }
    this.expiry = setTimeout(() => (ms > MAX_TIMER_MS ? this.arm() : this.ws.close(CLOSE_TOKEN_EXPIRED, 'token expired')), Math.min(ms, MAX_TIMER_MS));
    this.expiry.unref();
  }

  private onMessage(msg: Message): void {
    if (msg.type === 'snapshot') {
      void this.snapshot();
      return;
    }
    if (msg.type === 'auth') {
      void this.reauthenticate(typeof msg.token === 'string' ? msg.token : '');
      return;
    }
    if (msg.type === 'broadcast' && 'payload' in msg) {
      this.broadcast(JSON.stringify(msg.payload ?? null));
    } else if (msg.type === 'presence' && msg.state !== null && typeof msg.state === 'object' && !Array.isArray(msg.state)) {
      this.host.presence(this.client, JSON.stringify(msg.state));
    }
  }

  /**
   * One auth message is checked at a time (each costs a database round trip); of those
   * that arrive meanwhile only the latest is checked next, and a verdict is dropped when
   * a later message arrived while it was reached.
   */
  private async reauthenticate(token: string): Promise<void> {
    if (this.authRunning) {
      this.authPending = token;
      return;
    }
    this.authRunning = true;
    try {
      for (let next: string | null = token; next !== null; next = this.authPending) {
        this.authPending = null;
        const verdict = await this.host.reauthenticate(this.channel, this.current, next, this.groupId);
        if (this.ws.readyState !== this.ws.OPEN) return;
        if (this.authPending !== null) continue; // a later message decides
        if (verdict === null) {
          this.ws.close(CLOSE_TOKEN_EXPIRED, 'invalid token');
          return;
        }
        // 'unavailable' (the database is away): the current deadline stands.
        if (verdict !== 'unavailable') {
          this.current = verdict;
          this.arm();
        }
      }
    } finally {
      this.authRunning = false;
    }
  }

  /** One snapshot read in flight per socket; requests meanwhile are answered by one more. */
  private async snapshot(): Promise<void> {
    if (this.snapshotRunning) {
      this.snapshotAgain = true;
      return;
    }
    this.snapshotRunning = true;
    try {
      do {
        this.snapshotAgain = false;
        await this.host.sendSnapshot(this.client, this.groupId);
      } while (this.snapshotAgain && this.ws.readyState === this.ws.OPEN);
    } finally {
      this.snapshotRunning = false;
    }
  }

  private broadcast(payload: string): void {
    const { host, client, channel } = this;
    // What cannot fit a NOTIFY payload (8000 bytes with the envelope) is dropped here.
    if (Buffer.byteLength(payload) + Buffer.byteLength(channel) > MAX_BROADCAST_BYTES) return;
    if (client.batch !== null) {
      client.batch.push(payload); // joins the broadcasts still waiting at the tail
      return;
    }
    const batch = (client.batch = [payload]);
    host.enqueue(client, () => {
      if (client.batch === batch) client.batch = null;
      return batch.length === 1
        ? q.broadcast(host.sql, host.bcChannel, channel, client.id, batch[0])
        : q.broadcastMany(host.sql, host.bcChannel, channel, client.id, batch);
    });
  }

  private onClose(): void {
    const { host, client, channel } = this;
    if (this.expiry !== null) clearTimeout(this.expiry);
    this.expiry = null;
    host.hub.remove(client);
    if (client.state !== null) {
      client.state = null;
      // A leave that cannot reach the database (it is away) is retried by the heartbeat,
      // so no client stays listed after it left.
      const leave = () => q.presenceLeave(host.sql, host.bcChannel, channel, client.id);
      client.queue = client.queue.then(leave).catch(() => {
        host.leaveLater(leave);
      });
    }
  }
}
