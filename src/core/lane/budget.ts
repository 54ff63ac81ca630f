/**
 * The connection budget of an instance (DB_POOL_SIZE): every request connection it opens,
 * whatever it serves (the owner pool, any API role's lanes or transaction pool), is taken
 * from one budget. A pool that needs a connection while the budget is spent waits up to
 * DB_POOL_TIMEOUT_MS; meanwhile the budget asks the pools to close a connection that is idle
 * (a role's idle lane, the owner pool's oldest idle connection), so that a burst on one role
 * never leaves another without a connection for longer than one close. A wait that times out
 * fails with the code `DB_BUSY`: 503 `database busy` (core/errors.ts).
 *
 * The postgres driver's pools take their connections from the budget through its `socket`
 * option (`budgetedSocket`): the socket a connection opens holds one unit of the budget until
 * it closes.
 */
import net from 'node:net';
import { Duplex } from 'node:stream';
import tls from 'node:tls';
import { LaneError, type TlsMode } from './client.ts';

/** A pool's way of closing one of its idle connections (`spareOnly`: only one it can spare); true when one was closed. */
export type Evictor = (spareOnly: boolean) => boolean;

interface Waiter {
  resolve(): void;
  timer: NodeJS.Timeout;
  /** The evictor of the pool that waits: not asked for this waiter, for the first half of its wait. */
  self: Evictor | undefined;
  since: number;
}

export class ConnectionBudget {
  private used = 0;
  readonly limit: number;
  readonly timeoutMs: number;
  private readonly waiters: Waiter[] = [];
  /**
   * Close one idle connection (with `spareOnly`, only one its pool can spare: not a role's
   * last lane); true when one was closed (its close gives its unit back).
   */
  private readonly evictors = new Set<Evictor>();
  /** While requests wait: asks the pools for an idle connection every few milliseconds. */
  private evicting: NodeJS.Timeout | null = null;
  /** When a connection was last refused: a wait that timed out, or the database refusing a new one (performance.now(); 0: never). */
  refusedAt = 0;

  constructor(limit = Infinity, timeoutMs = 5000) {
    this.limit = limit;
    this.timeoutMs = timeoutMs;
  }

  /** Connections held now. */
  get inUse(): number {
    return this.used;
  }

  /** Requests waiting for a connection now. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** A unit now if one is free (no wait, nobody ahead): true when taken. */
  tryTake(): boolean {
    if (this.used >= this.limit || this.waiters.length > 0) return false;
    this.used++;
    return true;
  }

  /**
   * A unit, waiting up to `timeoutMs` for one; rejects with `DB_BUSY` after that. `self`: the
   * evictor of the pool asking. A pool that waits is not asked to close one of its own idle
   * connections before other pools' idle ones: a pool busy enough to open another one (the
   * owner pool under the webhook worker's jobs) closed its own idle connection for it, again
   * and again, and reconnected about a hundred times a second. Only after half its wait may
   * it close its own: the query it opens the connection for would fail at the end of the wait,
   * while its own idle connection could serve it.
   */
  take(self?: Evictor): Promise<void> {
    if (this.tryTake()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = {
        self,
        since: performance.now(),
        resolve,
        timer: setTimeout(() => {
          const i = this.waiters.indexOf(w);
          if (i >= 0) this.waiters.splice(i, 1);
          if (this.waiters.length === 0) this.stopEvicting();
          this.refusedAt = performance.now();
          reject(new LaneError('no database connection became free in time', 'DB_BUSY'));
        }, this.timeoutMs),
      };
      this.waiters.push(w);
      // A connection busy now may be idle in a moment: ask again until nobody waits.
      if (!this.evictOne() && this.evicting === null) {
        this.evicting = setInterval(() => {
          if (this.waiters.length === 0) this.stopEvicting();
          else this.evictOne();
        }, 5);
      }
    });
  }

  /** Give a unit back: to the first waiter, if any. */
  give(): void {
    const w = this.waiters.shift();
    if (w) {
      if (this.waiters.length === 0) this.stopEvicting();
      clearTimeout(w.timer);
      w.resolve();
      return;
    }
    this.used--;
  }

  /** Register a pool's way of closing one of its idle connections; returns the unregistration. */
  onEvict(evict: Evictor): () => void {
    this.evictors.add(evict);
    return () => this.evictors.delete(evict);
  }

  private stopEvicting(): void {
    if (this.evicting !== null) clearInterval(this.evicting);
    this.evicting = null;
  }

  /**
   * Spare idle connections first (a role's second lane, an idle pool connection), then any
   * idle one. The unit goes to the first waiter: not one of its own pool's idle connections,
   * for the first half of its wait (another waiter's pool's may go).
   */
  private evictOne(): boolean {
    const head = this.waiters[0];
    const own = head !== undefined && performance.now() - head.since < this.timeoutMs / 2 ? head.self : undefined;
    for (const spareOnly of [true, false]) {
      for (const evict of this.evictors) if (evict !== own && evict(spareOnly)) return true;
    }
    return false;
  }
}

/** The connection target as the postgres driver parses it (its `socket` option gets these). */
interface SocketTarget {
  host: string[];
  port: number[];
  path?: string | false;
}

/** A socket that fails at once with `err` (the driver then fails the query that waited for it). */
function failedSocket(err: Error): Duplex {
  const d = new Duplex({
    read() {},
    write(_chunk, _enc, cb) {
      cb();
    },
  });
  setImmediate(() => d.destroy(err));
  return d;
}

/**
 * The postgres driver's `socket` option for a pool inside `budget`: each connection waits for
 * a unit of the budget, then connects; the unit comes back when the socket closes. With
 * `tlsMode` other than `disable` it negotiates TLS itself (PostgreSQL's SSLRequest, then a
 * TLS handshake, as libpq's sslmode says) and hands the driver the TLS socket, with TLS off
 * in the driver: the unit is then tied to the socket the driver really uses, so it comes back
 * when that one closes (a socket the driver upgraded itself hid its close from the budget).
 */
export function budgetedSocket(
  budget: ConnectionBudget,
  connectTimeoutMs: number,
  tlsMode: TlsMode = 'disable',
  self?: () => Evictor | undefined,
): (o: SocketTarget) => Promise<Duplex> {
  return async (o) => {
    try {
      await budget.take(self?.());
    } catch (err) {
      return failedSocket(err as Error);
    }
    const s = o.path ? net.connect(o.path) : net.connect(o.port[0], o.host[0]);
    // The unit comes back when the connection is over: closed, or ended by either side (a
    // peer that does not close its half after the Terminate must not hold the unit).
    let given = false;
    const giveBack = () => {
      if (given) return;
      given = true;
      budget.give();
    };
    const watch = (x: Duplex) => {
      x.once('close', giveBack);
      x.once('end', giveBack);
      x.once('finish', giveBack);
    };
    watch(s);
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<Error>((resolve) => {
      timer = setTimeout(() => resolve(new LaneError('timed out connecting to the database', 'CONNECT_TIMEOUT')), connectTimeoutMs);
    });
    const connected = new Promise<Error | null>((resolve) => {
      s.once('connect', () => resolve(null));
      s.once('error', (e) => resolve(e));
    });
    let err = await Promise.race([connected, deadline]);
    let out: Duplex = s;
    // libpq speaks TLS over TCP only, never on a Unix socket.
    if (err === null && tlsMode !== 'disable' && !o.path) {
      const secured = await Promise.race([negotiateTls(s, tlsMode, o.host[0]), deadline]);
      if (secured instanceof Error) err = secured;
      else if (secured !== null) {
        watch(secured);
        out = secured;
      }
    }
    clearTimeout(timer);
    if (err === null) return out;
    budget.refusedAt = performance.now();
    s.destroy();
    if (out !== s) out.destroy();
    return failedSocket(err);
  };
}

/** SSLRequest, then TLS as `mode` asks: the TLS socket, null to go on in plaintext (`prefer` and a server without TLS), or the error. */
function negotiateTls(s: net.Socket, mode: TlsMode, host: string | undefined): Promise<tls.TLSSocket | null | Error> {
  return new Promise((resolve) => {
    s.once('error', (e: Error) => resolve(e));
    s.once('data', (answer: Buffer) => {
      if (answer[0] !== 0x53) {
        resolve(mode === 'prefer' ? null : new LaneError(`the database server does not accept TLS (sslmode=${mode})`, 'TLS_REFUSED'));
        return;
      }
      const t = tls.connect({
        socket: s,
        servername: host !== undefined && net.isIP(host) === 0 ? host : undefined,
        rejectUnauthorized: mode === 'verify-full' || mode === 'verify-ca',
        ...(mode === 'verify-ca' ? { checkServerIdentity: () => undefined } : {}),
      });
      t.once('secureConnect', () => resolve(t));
      t.once('error', (e: Error) => resolve(e));
    });
    // SSLRequest: length 8, code 80877103.
    s.write(Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]));
  });
}
