/**
 * One Sync per request, and one query for the driver: the request lanes' socket, which puts
 * the claims statement and the work into one implicit transaction (PostgreSQL's extended
 * protocol: every message up to a Sync is one transaction unless it says otherwise).
 *
 * `Db.withContext` gives the work query a prelude (`claimsPrelude`: Bind and Execute of the
 * claims statement), which the driver sends right in front of the work's Bind, before its
 * Sync (scripts/patch-deps.ts). This socket, given to the driver as its `socket`, follows
 * every message both ways:
 *
 * - out: the claims statement is parsed once per connection (a Parse put in front of the
 *   first prelude); a Bind that does not follow a prelude in its unit (a "stray": a query
 *   sent without claims) is refused before it runs: a Parse that cannot succeed goes in front
 *   of it, PostgreSQL skips the rest up to its Sync, and the driver gets an 08006 error. Only
 *   the driver's own type query (TYPES_SQL, a catalog read) may run alone.
 * - in: the replies to the prelude (and to that Parse) are left out, so the driver sees the
 *   replies to its own messages only. If the claims statement fails, its error goes to the
 *   driver as the work's (PostgreSQL skips the work): the work fails with its cause, never
 *   runs without claims.
 *
 * Each message sent adds what it is answered with to a queue; replies are matched to it in
 * order (PostgreSQL answers in order; after an error it skips to the next Sync). A reply that
 * does not match closes the connection: out of step, it fails closed. Nothing here parses
 * rows: only message headers, and the names in a Parse and a Bind.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { Duplex } from 'node:stream';
import tls from 'node:tls';

/**
 * The per-request statement: claims, and the API role's statement timeout (null: the
 * session's). Both calls sit in FROM so the row it answers has no columns: the claims are
 * not sent back on every request.
 */
export const CLAIMS_SQL =
  "select from pg_catalog.set_config('request.jwt.claims', $1, true) _c, pg_catalog.set_config('statement_timeout', coalesce($2, pg_catalog.current_setting('statement_timeout')), true) _t";

/**
 * Its name on a lane, parsed there by the socket once per connection. Random per process, as
 * the driver's own names are: SQL running on the lane could DEALLOCATE it and PREPARE its
 * own under the name, were the name known; `pg_prepared_statements`, where it would show, is
 * closed to every role but the superusers (migration 000011).
 */
const CLAIMS_STATEMENT = `plinth_claims_${randomBytes(16).toString('hex')}`;

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

// Frontend messages.
const P = 0x50; // Parse
const B = 0x42; // Bind
const D = 0x44; // Describe (backend: DataRow)
const EX = 0x45; // Execute (backend: ErrorResponse)
const S = 0x53; // Sync (backend: ParameterStatus)
const CL = 0x43; // Close (backend: CommandComplete)
const Q = 0x51; // Query (simple protocol)
// Backend messages.
const E = 0x45; // ErrorResponse
const Z = 0x5a; // ReadyForQuery
const T = 0x54; // RowDescription
const N = 0x4e; // NoticeResponse
const A = 0x41; // NotificationResponse
const PS = 0x53; // ParameterStatus

const SYNC = Buffer.from([S, 0, 0, 0, 4]);

function message(type: number, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head[0] = type;
  head.writeUInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/** A Parse of `text` as `name`, its parameters typed as given (OIDs). */
function parse(name: string, text: string, types: number[] = []): Buffer {
  const t = Buffer.alloc(2 + 4 * types.length);
  t.writeUInt16BE(types.length, 0);
  types.forEach((oid, i) => t.writeUInt32BE(oid, 2 + 4 * i));
  return message(P, Buffer.concat([Buffer.from(name + '\0' + text + '\0'), t]));
}

function errorResponse(code: string, text: string): Buffer {
  return message(E, Buffer.from(`SERROR\0VERROR\0C${code}\0M${text}\0\0`));
}

/** Both parameters text (OID 25). */
const CLAIMS_PARSE = parse(CLAIMS_STATEMENT, CLAIMS_SQL, [25, 25]);
/** Sent before each Parse of it: gone (a DEALLOCATE ALL) or not, the Parse then succeeds. */
const CLAIMS_CLOSE = message(CL, Buffer.from(`S${CLAIMS_STATEMENT}\0`));
/** A Parse that always fails at parse time: what a stray unit meets first. */
const POISON = parse('', 'select pg_catalog.plinth_request_without_claims()');
const LOST_CLAIMS = errorResponse('08006', 'request lane: a statement without its claims was not run');
const EXECUTE_ALL = Buffer.from([EX, 0, 0, 0, 9, 0, 0, 0, 0, 0]);
const BIND_HEAD = Buffer.from(`\0${CLAIMS_STATEMENT}\0`);

/**
 * The claims statement's Bind and Execute, for `options.prelude` of the work query: the
 * claims (JSON text) and the statement timeout (null: the session's), both text.
 */
export function claimsPrelude(claims: string, timeout: string | null): Buffer {
  const c = Buffer.byteLength(claims);
  const t = timeout === null ? 0 : Buffer.byteLength(timeout);
  // B, length, portal "", statement, 0 parameter formats, 2 parameters, 0 result formats.
  const bindLength = 4 + BIND_HEAD.length + 2 + 2 + 4 + c + 4 + t + 2;
  const out = Buffer.allocUnsafe(1 + bindLength + EXECUTE_ALL.length);
  let at = out.writeUInt8(B, 0);
  at = out.writeUInt32BE(bindLength, at);
  at += BIND_HEAD.copy(out, at);
  at = out.writeUInt16BE(0, at);
  at = out.writeUInt16BE(2, at);
  at = out.writeInt32BE(c, at);
  at += out.write(claims, at, 'utf8');
  at = out.writeInt32BE(timeout === null ? -1 : t, at);
  if (timeout !== null) at += out.write(timeout, at, 'utf8');
  at = out.writeUInt16BE(0, at);
  EXECUTE_ALL.copy(out, at);
  return out;
}

/** What a message sent is answered with. */
const Reply = {
  /** ParseComplete. */
  Parse: 0,
  /** BindComplete. */
  Bind: 1,
  /** ParameterDescription, then RowDescription or NoData. */
  DescribeStatement: 2,
  /** RowDescription or NoData. */
  DescribePortal: 3,
  /** DataRows, then CommandComplete, EmptyQueryResponse or PortalSuspended. */
  Execute: 4,
  /** CloseComplete. */
  Close: 5,
  /** ReadyForQuery. */
  Sync: 6,
  /** The poison Parse: an ErrorResponse, replaced by LOST_CLAIMS. */
  Poison: 7,
} as const;
type Reply = (typeof Reply)[keyof typeof Reply];

/** The backend message types that answer each, as the first byte. */
const ANSWERS: Record<Reply, string> = {
  [Reply.Parse]: '1',
  [Reply.Bind]: '2',
  [Reply.DescribeStatement]: 't',
  [Reply.DescribePortal]: 'Tn',
  [Reply.Execute]: 'DCIs',
  [Reply.Close]: '3',
  [Reply.Sync]: 'Z',
  [Reply.Poison]: '',
};

interface Expected {
  reply: Reply;
  /** A reply to the socket's own message (the prelude, the claims Parse): left out. */
  own: boolean;
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
function pipelining<Base extends SocketClass>(Base: Base) {
  class Pipelined extends Base {
    /** Set at the first ReadyForQuery: from then on every write is whole protocol messages. */
    #ready = false;
    /** The replies still to come, in order (a queue: `#head` is the next). */
    #expected: Expected[] = [];
    #head = 0;
    /** An error arrived before its unit's Sync was sent: PostgreSQL skips what comes up to it. */
    #skipping = false;
    /** The claims statement: not parsed on this connection, its Parse sent, or parsed. */
    #claims: 'no' | 'sent' | 'yes' = 'no';
    /** In the unit being sent: a prelude Bind was seen (its Execute follows), then its Execute (the work may follow). */
    #prelude: 'none' | 'bound' | 'run' = 'none';
    readonly #typesNames = new Set<string>();
    #carry: Buffer | null = null;
    /** Bytes still to come of the message being read, whether they are kept. */
    #left = 0;
    #keep = true;
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

    #expect(reply: Reply, own = false): void {
      // After an error PostgreSQL skips everything up to the unit's Sync: nothing to expect.
      if (this.#skipping && reply !== Reply.Sync) return;
      if (reply === Reply.Sync) this.#skipping = false;
      this.#expected.push({ reply, own });
    }

    /** Follow what the driver sends: parse the claims statement once, refuse a stray unit. */
    #outgoing(chunk: Buffer): Buffer {
      if (!this.#ready || !Buffer.isBuffer(chunk)) return chunk;
      let out: Buffer[] | null = null;
      let from = 0;
      const insert = (at: number, bytes: Buffer[], skipTo = at) => {
        out ??= [];
        out.push(chunk.subarray(from, at), ...bytes);
        from = skipTo;
      };
      for (let i = 0; i < chunk.length; ) {
        const type = chunk[i];
        const end = i + 1 + chunk.readUInt32BE(i + 1);
        switch (type) {
          case P: {
            const [name, next] = cstring(chunk, i + 5);
            if (cstring(chunk, next)[0] === TYPES_SQL && name) this.#typesNames.add(name);
            this.#expect(Reply.Parse);
            break;
          }
          case B: {
            const [, next] = cstring(chunk, i + 5); // portal
            const [statement] = cstring(chunk, next);
            if (statement === CLAIMS_STATEMENT) {
              if (this.#claims === 'no' && !this.#skipping) {
                insert(i, [CLAIMS_CLOSE, CLAIMS_PARSE]);
                this.#expect(Reply.Close, true);
                this.#expect(Reply.Parse, true);
                this.#claims = 'sent';
              }
              this.#expect(Reply.Bind, true);
              this.#prelude = 'bound';
            } else if (this.#prelude === 'run' || this.#typesNames.has(statement)) {
              this.#prelude = 'none';
              this.#expect(Reply.Bind);
            } else {
              // A stray: it does not run (the poison's error makes PostgreSQL skip to the Sync).
              if (!this.#skipping) {
                insert(i, [POISON]);
                this.#expect(Reply.Poison);
                this.#skipping = true;
              }
            }
            break;
          }
          case EX:
            if (this.#prelude === 'bound') {
              this.#prelude = 'run';
              this.#expect(Reply.Execute, true);
            } else {
              this.#expect(Reply.Execute);
            }
            break;
          case D:
            this.#expect(chunk[i + 5] === S ? Reply.DescribeStatement : Reply.DescribePortal);
            break;
          case CL:
            this.#expect(Reply.Close);
            break;
          case S:
            this.#prelude = 'none';
            this.#expect(Reply.Sync);
            break;
          case Q:
            // The simple protocol has no place for a prelude: never run on a lane. Sent instead:
            // the poison and a Sync (its ReadyForQuery is what the driver waits for).
            insert(i, [POISON, SYNC], end);
            this.#expect(Reply.Poison);
            this.#skipping = true;
            this.#expect(Reply.Sync);
            break;
          // Flush, Terminate and the copy messages are not answered.
        }
        i = end;
      }
      if (out === null) return chunk;
      (out as Buffer[]).push(chunk.subarray(from));
      return Buffer.concat(out);
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
     * returns the bytes to hand to the driver, with messages left out or replaced.
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
          if (this.#left === 0 && this.#replaceWith) {
            flush(i);
            out.push(this.#replaceWith);
            this.#replaceWith = null;
          }
          continue;
        }
        // Act only on a whole header: keep a partial one for later.
        if (chunk.length - i < 5) {
          flush(i);
          this.#carry = Buffer.from(chunk.subarray(i));
          from = chunk.length;
          break;
        }
        if (!this.#incoming(chunk[i])) {
          // Out of step with what was sent: nothing more is read from this connection.
          this.destroy(new Error('request lane: a reply that does not match what was sent'));
          return [];
        }
        this.#left = 1 + chunk.readUInt32BE(i + 1);
      }
      flush(chunk.length);
      return out;
    }

    /** A message begins: match it to what was sent, set `keep`. false: it does not match. */
    #incoming(type: number): boolean {
      this.#keep = true;
      if (!this.#ready) {
        if (type === Z) this.#ready = true;
        return true;
      }
      if (type === N || type === A || type === PS) return true; // may come at any time
      const next = this.#expected[this.#head];
      if (next === undefined) return false;
      if (type === E) {
        if (next.reply === Reply.Poison) {
          // The poison's own error, replaced by one that says what happened.
          this.#keep = false;
          this.#replaceWith = LOST_CLAIMS;
        }
        // An error of the prelude goes to the driver as the work's: it is why the work did not run.
        // PostgreSQL now skips to the Sync: so does the queue.
        while (this.#expected[this.#head]?.reply !== Reply.Sync) {
          const dropped = this.#expected[this.#head];
          if (dropped === undefined) {
            this.#skipping = true; // the Sync is not sent yet
            break;
          }
          // The claims statement failed to parse, or to bind (SQL on the lane deallocated it):
          // the next prelude parses it again.
          if (dropped.own && (dropped.reply === Reply.Parse || dropped.reply === Reply.Bind)) this.#claims = 'no';
          this.#shift();
        }
        return true;
      }
      if (!ANSWERS[next.reply].includes(String.fromCharCode(type))) return false;
      this.#keep = !next.own;
      if (next.reply === Reply.DescribeStatement) {
        next.reply = Reply.DescribePortal; // its second reply comes next
        return true;
      }
      if (next.reply === Reply.Execute && type === D) return true; // more rows may come
      if (next.own && next.reply === Reply.Parse) this.#claims = 'yes';
      this.#shift();
      return true;
    }

    #shift(): void {
      this.#head++;
      if (this.#head === this.#expected.length) {
        this.#expected = [];
        this.#head = 0;
      } else if (this.#head > 64) {
        this.#expected = this.#expected.slice(this.#head);
        this.#head = 0;
      }
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
  // No Nagle (see RoleLanes): pipelined writes must not wait for the ACK of the ones before.
  const raw = net.connect({ port, host, noDelay: true });
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
