/**
 * One Sync per request: a socket for the request lanes that joins the claims statement and
 * the work into one implicit transaction (PostgreSQL's extended protocol: every message up
 * to a Sync is one transaction unless it says otherwise).
 *
 * porsager/postgres ends every query with a Sync and settles it at the ReadyForQuery that
 * answers it. `Db.withContext` sends two queries back to back on a lane: the claims
 * statement (CLAIMS_SQL) and the work. This socket, given to the driver as its `socket`,
 * watches the messages both ways:
 *
 * - out: a unit (the messages up to a Sync) whose statement is CLAIMS_SQL loses its Sync,
 *   so the next unit, the work, runs in the same transaction. A unit that does not follow
 *   a claims unit (a "stray": a query retried by the driver, one queued across a lost
 *   connection) is refused before it runs: a Parse that cannot succeed goes in front of it,
 *   PostgreSQL skips the rest up to its Sync, and the driver gets an 08006 error. Only the
 *   driver's own type query (TYPES_SQL, a catalog read) may run alone.
 * - in: after the claims statement's CommandComplete a ReadyForQuery is added, so the driver
 *   settles the claims query and goes on to the work, which receives the real one. If the
 *   claims statement fails, PostgreSQL skips the work; the work then gets an error too
 *   (never an empty success).
 *
 * Nothing here parses rows: only message headers, and the statement name of a Bind.
 */
import net from 'node:net';
import { Duplex } from 'node:stream';
import tls from 'node:tls';

/** The per-request statement: claims, and the API role's statement timeout (null: the session's). */
export const CLAIMS_SQL =
  "select pg_catalog.set_config('request.jwt.claims', $1, true), pg_catalog.set_config('statement_timeout', coalesce($2, pg_catalog.current_setting('statement_timeout')), true)";

/**
 * The one query porsager/postgres runs by itself on a new connection (array types), exactly
 * as it sends it (postgres 3.4.x, connection.js fetchArrayTypes). Should a driver update
 * change it, that query meets the stray rule and fails: loud, never open.
 */
const TYPES_SQL = `
      select b.oid, b.typarray
      from pg_catalog.pg_type a
      left join pg_catalog.pg_type b on b.oid = a.typelem
      where a.typcategory = 'A'
      group by b.oid, b.typarray
      order by b.oid
    `;

const P = 0x50; // Parse
const B = 0x42; // Bind
const S = 0x53; // Sync
const C = 0x43; // CommandComplete
const E = 0x45; // ErrorResponse
const Z = 0x5a; // ReadyForQuery
const X = 0x58; // Terminate
const Q = 0x51; // Query (simple protocol)

/** A Sync of this socket's own (told apart by identity): its ReadyForQuery is dropped. */
const OWN_SYNC = Buffer.from([S, 0, 0, 0, 4]);
const FLUSH = Buffer.from([0x48, 0, 0, 0, 4]);
const READY_IN_TX = Buffer.from([Z, 0, 0, 0, 5, 0x54]);
/** A Parse that always fails at parse time: what a stray unit meets first. */
const POISON = parse('', 'select pg_catalog.plinth_request_without_claims()');

function parse(name: string, text: string): Buffer {
  const body = Buffer.concat([Buffer.from(name + '\0' + text + '\0'), Buffer.from([0, 0])]);
  const head = Buffer.alloc(5);
  head[0] = P;
  head.writeUInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

function errorResponse(code: string, message: string): Buffer {
  const fields = Buffer.from(`SERROR\0VERROR\0C${code}\0M${message}\0\0`);
  const head = Buffer.alloc(5);
  head[0] = E;
  head.writeUInt32BE(fields.length + 4, 1);
  return Buffer.concat([head, fields]);
}

const LOST_CLAIMS = errorResponse('08006', 'request lane: a statement without its claims was not run');
const CLAIMS_FAILED = errorResponse('25P02', 'request lane: the claims statement failed, the work was not run');

type Kind = 'claims' | 'work' | 'types' | 'stray' | 'sync' | 'swallow';

interface Unit {
  kind: Kind;
  synced: boolean;
  /** A CommandComplete or ErrorResponse arrived for it. */
  answered: boolean;
  /** An ErrorResponse was made up for it already. */
  errorSent: boolean;
  /** A claims unit whose statement failed. */
  failed: boolean;
}

function cstring(buf: Buffer, at: number): [string, number] {
  const end = buf.indexOf(0, at);
  return [buf.toString('utf8', at, end), end + 1];
}

/** What the pipeline layer needs of the socket below it: a stream that emits 'data' and takes writes. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- TypeScript's mixin rule
type SocketClass = new (...args: any[]) => Duplex;

/**
 * The pipeline layer over a socket class: over `net.Socket` (plain TCP or a Unix socket,
 * the fast path) and over `TlsBridge` (TLS to the database, negotiated before the driver
 * sees the socket, so that this layer reads and writes plaintext).
 */
function pipelining<B extends SocketClass>(Base: B) {
  class Pipelined extends Base {
    /** Set at the first ReadyForQuery: from then on every write is whole protocol messages. */
    #ready = false;
    readonly #units: Unit[] = [];
    #open: Unit | null = null;
    /** The last unit out was a claims unit whose Sync was held back. */
    #armed = false;
    readonly #claimsNames = new Set<string>();
    readonly #typesNames = new Set<string>();
    #carry: Buffer | null = null;
    /** Bytes still to come of the message being read, whether they are kept, its type. */
    #left = 0;
    #keep = true;
    #current = 0;
    #replaceWith: Buffer | null = null;

    // net.Socket#connect resets an own or overridden `write`; the Writable hooks stay ours.
    override _write(chunk: Buffer, encoding: BufferEncoding, cb: (err?: Error | null) => void): void {
      super._write(this.#outgoing(chunk), encoding, cb);
    }

    override _writev(chunks: Array<{ chunk: Buffer; encoding: BufferEncoding }>, cb: (err?: Error | null) => void): void {
      super._writev!(
        chunks.map((c) => ({ chunk: this.#outgoing(c.chunk), encoding: c.encoding })),
        cb,
      );
    }

    /** Rewrite what the driver sends: hold back a claims unit's Sync, poison a stray unit. */
    #outgoing(chunk: Buffer): Buffer {
      if (chunk === OWN_SYNC) {
        this.#units.push({ kind: 'swallow', synced: true, answered: true, errorSent: true, failed: false });
        return chunk;
      }
      if (!this.#ready || !Buffer.isBuffer(chunk)) return chunk;
      const out: Buffer[] = [];
      let from = 0;
      let changed = false;
      for (let i = 0; i < chunk.length; ) {
        const type = chunk[i];
        const end = i + 1 + chunk.readUInt32BE(i + 1);
        if (this.#open === null) {
          const kind = this.#classify(chunk, i, type);
          this.#open = { kind, synced: false, answered: false, errorSent: false, failed: false };
          this.#units.push(this.#open);
          if (kind === 'stray') {
            out.push(chunk.subarray(from, i), POISON);
            from = i;
            changed = true;
          }
        } else if (type === P) {
          this.#learn(chunk, i);
        }
        if (type === Q) {
          // A simple Query is a unit of its own: it ends with its own ReadyForQuery.
          this.#open!.synced = true;
          this.#open = null;
        } else if (type === S) {
          const unit = this.#open;
          unit.synced = true;
          this.#open = null;
          if (unit.kind === 'claims' && unit.failed) {
            // Its statement failed before this Sync: the Sync goes out, its answer is dropped.
            this.#units.push({ kind: 'swallow', synced: true, answered: true, errorSent: true, failed: false });
          } else if (unit.kind === 'claims') {
            // Held back. When nothing follows in this write (the driver waits for the claims
            // query's answer before it sends the work, as after a first Parse), a Flush takes its
            // place: PostgreSQL answers an Execute only at a Sync or a Flush.
            out.push(chunk.subarray(from, i));
            if (end === chunk.length) out.push(FLUSH);
            from = end;
            changed = true;
            this.#armed = true;
          }
        }
        i = end;
      }
      if (!changed) return chunk;
      out.push(chunk.subarray(from));
      return Buffer.concat(out);
    }

    /** What a unit is, from its first message. */
    #classify(buf: Buffer, at: number, type: number): Kind {
      if (type === P) {
        const kind = this.#learn(buf, at);
        if (kind) return kind;
      } else if (type === B) {
        const [, next] = cstring(buf, at + 5); // portal
        const [name] = cstring(buf, next);
        if (this.#claimsNames.has(name)) return 'claims';
        if (this.#typesNames.has(name)) return 'types';
      } else if (type === S || type === X) {
        // A lone Sync (or Terminate) ends whatever transaction is open: nothing may join it after this.
        this.#armed = false;
        return 'sync';
      }
      if (this.#armed) {
        this.#armed = false;
        return 'work';
      }
      return 'stray';
    }

    /** Remember the name of a claims or types statement being parsed. */
    #learn(buf: Buffer, at: number): Kind | null {
      const [name, next] = cstring(buf, at + 5);
      const [text] = cstring(buf, next);
      if (text === CLAIMS_SQL) {
        if (name) this.#claimsNames.add(name);
        return 'claims';
      }
      if (text === TYPES_SQL) {
        if (name) this.#typesNames.add(name);
        return 'types';
      }
      return null;
    }

    override emit(event: string | symbol, ...args: unknown[]): boolean {
      if (event !== 'data') return super.emit(event, ...args);
      // Each piece holds whole messages (or continues one): the driver takes them one by one
      // without copying them together.
      for (const piece of this.#read(args[0] as Buffer)) super.emit('data', piece);
      return true;
    }

    /**
     * Walk the incoming messages (headers only) from the first byte of the connection;
     * returns the bytes to hand to the driver, with messages added or left out.
     */
    #read(input: Buffer): Buffer[] {
      let chunk = input;
      if (this.#carry) {
        chunk = Buffer.concat([this.#carry, input]);
        this.#carry = null;
      }
      const out: Buffer[] = [];
      let from = 0;
      let i = 0;
      const flush = (to: number) => {
        if (to > from) out.push(chunk.subarray(from, to));
        from = to;
      };
      while (i < chunk.length) {
        if (this.#left > 0) {
          const n = Math.min(this.#left, chunk.length - i);
          if (!this.#keep) {
            flush(i);
            from = i + n;
          }
          i += n;
          this.#left -= n;
          if (this.#left === 0) {
            const after = this.#ended(this.#current);
            if (after) {
              flush(i);
              out.push(after);
            }
          }
          continue;
        }
        // Act only on a whole header (and a whole ReadyForQuery): keep a partial one for later.
        const rest = chunk.length - i;
        if (rest < 5 || (rest < 6 && chunk[i] === Z)) {
          flush(i);
          this.#carry = Buffer.from(chunk.subarray(i));
          from = chunk.length;
          break;
        }
        const type = chunk[i];
        const before = this.#starting(type);
        if (before) {
          flush(i);
          out.push(before);
        }
        this.#current = type;
        this.#left = 1 + chunk.readUInt32BE(i + 1);
      }
      flush(chunk.length);
      return out;
    }

    /** Before a message: bytes to put in front of it; sets `keep`. */
    #starting(type: number): Buffer | null {
      this.#keep = true;
      if (type === Z) {
        if (!this.#ready) {
          this.#ready = true;
          return null;
        }
        const unit = this.#units[0];
        if (unit === undefined) return null;
        if (unit.kind === 'swallow') {
          this.#keep = false;
          return null;
        }
        if (unit.kind !== 'sync' && !unit.answered && !unit.errorSent) {
          // A unit with an Execute that got neither a result nor an error was skipped.
          unit.errorSent = true;
          return unit.kind === 'stray' ? LOST_CLAIMS : CLAIMS_FAILED;
        }
        return null;
      }
      if (type === E && this.#ready) {
        const unit = this.#units[0];
        if (unit?.kind === 'stray' && !unit.answered) {
          // The poison's own error, replaced by one that says what happened.
          unit.answered = true;
          unit.errorSent = true;
          this.#keep = false;
          this.#replaceWith = LOST_CLAIMS;
        }
      }
      return null;
    }

    /** After a message: bytes to put behind it. */
    #ended(type: number): Buffer | null {
      if (this.#replaceWith) {
        const b = this.#replaceWith;
        this.#replaceWith = null;
        return b;
      }
      if (!this.#ready) return null;
      if (type === Z) {
        this.#units.shift();
        return null;
      }
      if (type !== C && type !== E) return null;
      const unit = this.#units[0];
      if (unit === undefined) return null;
      unit.answered = true;
      if (unit.kind !== 'claims') return null;
      // The claims statement is done: a made-up ReadyForQuery settles it in the driver.
      this.#units.shift();
      if (type === C) return READY_IN_TX;
      // It failed: PostgreSQL now skips every message up to the next Sync.
      unit.failed = true;
      this.#armed = false;
      if (!unit.synced) {
        // Failed at Parse: the driver sends its Sync for it (passed on; the answer is dropped).
        return READY_IN_TX;
      }
      const next = this.#units[0];
      if (next === undefined) {
        // The work is not out yet: end the failed transaction now; it will come as a stray.
        this.write(OWN_SYNC);
        return READY_IN_TX;
      }
      if (!next.synced && !next.errorSent) {
        // The work waits for a Describe answer that will not come: fail it now, and the
        // driver sends its Sync.
        next.errorSent = true;
        return Buffer.concat([READY_IN_TX, CLAIMS_FAILED]);
      }
      return READY_IN_TX;
    }
  }
  return Pipelined;
}

/** Plain TCP or a Unix socket: `new PipelineSocket().connect(…)`. */
export class PipelineSocket extends pipelining(net.Socket) {}

/**
 * A TLS connection as the driver's socket: writes go to the TLS socket below, its plaintext
 * comes up as 'data'. The SSLRequest and the handshake happen before (connectTls), so the
 * driver is given `ssl: false` and speaks plaintext to the pipeline layer.
 */
class TlsBridge extends Duplex {
  #inner: net.Socket | null = null;

  constructor() {
    super({ allowHalfOpen: false });
  }

  attach(inner: net.Socket): this {
    this.#inner = inner;
    inner.on('data', (d: Buffer) => this.emit('data', d));
    inner.on('drain', () => this.emit('drain'));
    inner.on('error', (err) => this.destroy(err));
    inner.on('close', () => this.destroy());
    return this;
  }

  get readyState(): string {
    return this.#inner && !this.destroyed ? this.#inner.readyState : 'closed';
  }

  setKeepAlive(enable?: boolean, delay?: number): this {
    this.#inner?.setKeepAlive(enable, delay);
    return this;
  }

  override _read(): void {}

  // The pipeline layer above overrides both and calls these through `super` (never `this`).
  override _write(chunk: Buffer, _encoding: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.#send(chunk, cb);
  }

  override _writev(chunks: Array<{ chunk: Buffer }>, cb: (err?: Error | null) => void): void {
    this.#send(Buffer.concat(chunks.map((c) => c.chunk)), cb);
  }

  #send(chunk: Buffer, cb: (err?: Error | null) => void): void {
    if (this.#inner) this.#inner.write(chunk, cb);
    else cb(new Error('not connected'));
  }

  override _final(cb: (err?: Error | null) => void): void {
    if (this.#inner) this.#inner.end(cb);
    else cb();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.#inner?.destroy();
    cb(err);
  }
}

class PipelineTlsSocket extends pipelining(TlsBridge) {}

/** What the database URL asks of TLS, as libpq and the driver read it (`sslmode`, `ssl`, `sslrootcert=system`). */
export type TlsMode = 'disable' | 'prefer' | 'require' | 'verify-ca' | 'verify-full';

export function tlsModeOf(url: string): TlsMode {
  const q = new URL(url).searchParams;
  if (q.get('sslrootcert') === 'system') return 'verify-full';
  const mode = q.get('sslmode') ?? q.get('ssl');
  if (mode === null || mode === 'disable' || mode === 'false') return 'disable';
  if (mode === 'allow' || mode === 'prefer') return 'prefer';
  if (mode === 'verify-ca' || mode === 'verify-full') return mode;
  return mode === 'require' ? 'require' : 'verify-full';
}

const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);

/**
 * A lane socket over TLS: SSLRequest, PostgreSQL's one-byte answer, the handshake (verified
 * as `mode` says: `require` and `prefer` encrypt without checking the certificate, as libpq
 * and the driver do; `verify-ca` checks the chain; `verify-full` the chain and the host name),
 * then the pipeline layer on the plaintext. `prefer` goes on in plaintext when the server
 * refuses TLS; the other modes fail. `timeoutMs` bounds the SSLRequest and the handshake (the
 * driver's connect timeout starts after). TCP only: PostgreSQL speaks no TLS on a Unix socket.
 *
 * A socket factory that rejects leaves the driver's connection waiting for good (it never
 * reconnects): a failed negotiation is handed over as a socket that fails at once, which the
 * driver handles as any lost connection (the query that opened it fails).
 */
export function connectTls(host: string, port: number, mode: Exclude<TlsMode, 'disable'>, timeoutMs: number): Promise<Duplex> {
  return negotiate(host, port, mode, timeoutMs).catch((err: Error) => {
    const failed = new PipelineTlsSocket();
    setImmediate(() => failed.destroy(err));
    return failed;
  });
}

async function negotiate(host: string, port: number, mode: Exclude<TlsMode, 'disable'>, timeoutMs: number): Promise<Duplex> {
  const raw = net.connect(port, host);
  const timer = setTimeout(() => raw.destroy(new Error('timed out negotiating TLS with the database')), timeoutMs);
  try {
    const answer = await new Promise<number>((resolve, reject) => {
      raw.once('error', reject);
      raw.once('close', () => reject(new Error('the database closed the connection before TLS')));
      raw.once('data', (d: Buffer) => resolve(d[0]));
      raw.write(SSL_REQUEST);
    });
    raw.removeAllListeners();
    if (answer !== 0x53) {
      if (mode !== 'prefer') throw new Error('the database server does not accept TLS (sslmode=' + mode + ')');
      // Plaintext on the same connection: the pipeline layer over it, as a bridge.
      return new PipelineTlsSocket().attach(raw);
    }
    const secure = tls.connect({
      socket: raw,
      servername: net.isIP(host) ? undefined : host,
      rejectUnauthorized: mode === 'verify-ca' || mode === 'verify-full',
      ...(mode === 'verify-ca' ? { checkServerIdentity: () => undefined } : {}),
    });
    await new Promise<void>((resolve, reject) => {
      secure.once('error', reject);
      secure.once('secureConnect', () => resolve());
    });
    secure.removeAllListeners('error');
    return new PipelineTlsSocket().attach(secure);
  } catch (err) {
    raw.destroy();
    throw err;
  } finally {
    clearTimeout(timer);
  }
}
