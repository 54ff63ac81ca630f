/**
 * One connection of a request lane: a node-postgres client in pipeline mode (connection,
 * authentication and TLS are its own), to which each request goes as one submittable unit:
 *
 *   Bind + Execute of the claims statement, [Parse] + Bind + [Describe] + Execute of the
 *   work, one Sync
 *
 * PostgreSQL runs everything up to a Sync as one implicit transaction: the claims
 * (`set_config(…, true)`, local to it) hold for the work and for nothing after it, and if the
 * claims statement fails the work is skipped, never run without them. One unit, one
 * ReadyForQuery: one round trip per request, and requests sent in the same turn of the event
 * loop leave in one socket write.
 *
 * Statements are named (parsed once per connection, their row description kept), or, for a
 * pooler in transaction mode (PgBouncer), unnamed: parsed and described in every unit, and no
 * startup parameter beyond those every pooler forwards. A named statement that is gone (SQL
 * on the lane ran DEALLOCATE) or whose result changed shape (DDL) fails its unit, which then
 * runs once more with the statement parsed again: nothing of the failed unit ran.
 */
import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import pg from 'pg';
import { parserFor, type LaneQuery, type Row, type Rows } from './sql.ts';

/**
 * The per-request statement: claims, and the API role's statement timeout (null: the
 * session's). Both calls sit in FROM so the row it answers has no columns: the claims are
 * not sent back on every request.
 */
export const CLAIMS_SQL =
  "select from pg_catalog.set_config('request.jwt.claims', $1, true) _c, pg_catalog.set_config('statement_timeout', coalesce($2, pg_catalog.current_setting('statement_timeout')), true) _t, pg_catalog.set_config('request.id', coalesce($3, ''), true) _i";

/** The three parameters text. */
const CLAIMS_TYPES = [25, 25, 25];

/**
 * Statement names on the lanes: random per process, as a driver's are. SQL running on a lane
 * could DEALLOCATE a statement and PREPARE its own under the name, were the name known;
 * `pg_prepared_statements`, where it would show, is closed to every role but the superusers.
 */
const NAME_PREFIX = `plinth_${randomBytes(12).toString('hex')}_`;

/** Named statements kept per connection; past this the oldest is closed. */
const MAX_STATEMENTS = 2000;

export type TlsMode = 'disable' | 'prefer' | 'require' | 'verify-ca' | 'verify-full';

/** What the database URL asks of TLS, as libpq reads it (`sslmode`, `ssl`, `sslrootcert=system`). */
export function tlsModeOf(url: string): TlsMode {
  const q = new URL(url).searchParams;
  if (q.get('sslrootcert') === 'system') return 'verify-full';
  const mode = q.get('sslmode') ?? q.get('ssl');
  if (mode === null || mode === 'disable' || mode === 'false') return 'disable';
  if (mode === 'allow' || mode === 'prefer') return 'prefer';
  if (mode === 'verify-ca' || mode === 'verify-full') return mode;
  return mode === 'require' ? 'require' : 'verify-full';
}

/** node-postgres's connection settings from a database URL (a `host` parameter names a socket folder), TLS as `mode` says. */
export function clientConfig(url: string, mode: TlsMode): pg.ClientConfig {
  const u = new URL(url);
  return {
    host: u.searchParams.get('host') ?? (decodeURIComponent(u.hostname).replace(/^\[|\]$/g, '') || 'localhost'),
    port: Number(u.port || 5432),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    database: decodeURIComponent(u.pathname.slice(1)),
    ssl:
      mode === 'disable'
        ? false
        : mode === 'verify-full'
          ? { rejectUnauthorized: true }
          : mode === 'verify-ca'
            ? { rejectUnauthorized: true, checkServerIdentity: () => undefined }
            : { rejectUnauthorized: false },
  };
}

/** An error of a lane, shaped as the `postgres` driver's (`code`, `constraint_name` …) so one mapper reads both. */
export class LaneError extends Error {
  code: string;
  constraint_name?: string;
  detail?: string;
  hint?: string;
  routine?: string;
  table_name?: string;
  column_name?: string;
  schema_name?: string;
  severity?: string;

  constructor(message: string, code: string) {
    super(message);
    this.name = 'LaneError';
    this.code = code;
  }

  static of(err: unknown): LaneError {
    if (err instanceof LaneError) return err;
    const e = err as Partial<pg.DatabaseError> & { code?: string; message?: string };
    if (err instanceof pg.DatabaseError) {
      const out = new LaneError(e.message ?? 'database error', e.code ?? 'XX000');
      out.constraint_name = e.constraint;
      out.detail = e.detail;
      out.hint = e.hint;
      out.routine = e.routine;
      out.table_name = e.table;
      out.column_name = e.column;
      out.schema_name = e.schema;
      out.severity = e.severity;
      return out;
    }
    // A lost socket (pg's "Connection terminated …", ECONNRESET …): the driver's code for it.
    const code = typeof e.code === 'string' && e.code !== '' ? e.code : 'CONNECTION_CLOSED';
    const out = new LaneError(String(e.message ?? err), code);
    out.cause = err;
    return out;
  }
}

export interface LaneConnectOptions {
  url: string;
  /** The API role: the session role (set on the login role too; as a startup option unless `pooler`). */
  role: string;
  applicationName: string;
  tls: TlsMode;
  connectTimeoutMs: number;
  /** Behind a pooler in transaction mode: unnamed statements only, no `options` startup parameter. */
  pooler: boolean;
}

interface Statement {
  name: string;
  /** Sent (a Parse is on its way or done). */
  parsed: boolean;
  /** Its row description, once described: how each column is named and read. */
  columns: Array<[string, ((x: string) => unknown) | null]> | null;
}

/** pg's socket-facing connection, as a submittable sees it (its `parse`, `bind` … write one message each). */
type Wire = pg.Connection & { stream: Duplex };

/** One open connection of a lane. `run` sends a request; `closed` is set when its socket is gone. */
export class LaneConnection {
  readonly client: pg.Client;
  /** Requests sent and not yet answered. */
  inflight = 0;
  closed = false;
  readonly opened = performance.now();
  private readonly pooler: boolean;
  private readonly statements = new Map<string, Statement>();
  /** The claims statement's name on this connection (a new one after a DEALLOCATE), and whether it is parsed. */
  private claims: Statement;
  private generation = 0;
  /** Statements evicted from the cache, closed in the next unit. */
  private toClose: string[] = [];
  private corked = false;
  private readonly uncork = (): void => {
    this.corked = false;
    (this.client.connection as Wire).stream.uncork();
  };

  private constructor(client: pg.Client, pooler: boolean) {
    this.client = client;
    this.pooler = pooler;
    this.claims = this.newClaims();
    client.on('error', () => {
      // pg has failed every query on it (each unit rejects); the socket goes too, and the
      // lane opens another connection at its next request.
      this.closed = true;
      client.connection.stream.destroy();
    });
    client.on('end', () => {
      this.closed = true;
    });
    // Notices (a RAISE NOTICE in user SQL) are not the lane's business.
    client.on('notice', () => {});
  }

  /** Connect as `url` says; rejects (CONNECT_TIMEOUT, TLS refused, authentication …) with a LaneError. */
  static async open(o: LaneConnectOptions): Promise<LaneConnection> {
    if (o.tls === 'prefer') {
      try {
        return await LaneConnection.attempt(o, true);
      } catch (err) {
        // libpq's `prefer`: plaintext when the server does not speak TLS.
        if ((err as LaneError).code !== 'TLS_REFUSED') throw err;
        return LaneConnection.attempt(o, false);
      }
    }
    return LaneConnection.attempt(o, o.tls !== 'disable');
  }

  private static attempt(o: LaneConnectOptions, tls: boolean): Promise<LaneConnection> {
    const client = new pg.Client({
      ...clientConfig(o.url, tls ? o.tls : 'disable'),
      application_name: o.applicationName,
      // The session role as a startup option (a pooler refuses `options`: there the login role's own setting holds).
      ...(o.pooler ? {} : { options: `-c role=${o.role}` }),
      pipeline: true,
    });
    let secured = false;
    client.connection.once('sslconnect', () => (secured = true));
    return new Promise<LaneConnection>((resolve, reject) => {
      let settled = false;
      const fail = (err: LaneError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        client.removeAllListeners('error');
        client.on('error', () => {});
        client.connection.stream.destroy();
        reject(err);
      };
      const timer = setTimeout(
        () =>
          fail(
            new LaneError(
              tls && !secured ? 'timed out negotiating TLS with the database' : 'timed out connecting to the database',
              'CONNECT_TIMEOUT',
            ),
          ),
        o.connectTimeoutMs,
      );
      const refused = (err: unknown) =>
        err instanceof Error && /does not support SSL/.test(err.message)
          ? new LaneError(`the database server does not accept TLS (sslmode=${o.tls})`, 'TLS_REFUSED')
          : LaneError.of(err);
      client.on('error', (err: Error) => fail(refused(err)));
      client.connect().then(
        () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          client.removeAllListeners('error');
          resolve(new LaneConnection(client, o.pooler));
        },
        (err: unknown) => fail(refused(err)),
      );
    });
  }

  private newClaims(): Statement {
    return { name: this.pooler ? '' : `${NAME_PREFIX}c${this.generation}`, parsed: false, columns: null };
  }

  /** The statement for `q`'s text and parameter types on this connection (unnamed behind a pooler). */
  statement(q: LaneQuery): Statement {
    if (this.pooler) return { name: '', parsed: false, columns: null };
    const key = q.types.length === 0 || q.types.every((t) => t === 0) ? q.text : q.types.join(',') + ';' + q.text;
    let s = this.statements.get(key);
    if (s) return s;
    if (this.statements.size >= MAX_STATEMENTS) {
      const [oldest, old] = this.statements.entries().next().value!;
      this.statements.delete(oldest);
      if (old.parsed) this.toClose.push(old.name);
    }
    s = { name: `${NAME_PREFIX}${this.generation}_${this.statements.size}_${randomBytes(3).toString('hex')}`, parsed: false, columns: null };
    this.statements.set(key, s);
    return s;
  }

  /**
   * Forget what this connection has parsed (a statement was gone: SQL on the lane ran
   * DEALLOCATE): from now on every statement is parsed again, under a new name.
   */
  forgetAll(): void {
    this.generation++;
    this.statements.clear();
    this.claims = this.newClaims();
  }

  /**
   * A statement this connection cannot be sure of (its unit failed after sending its Parse,
   * or its result changed shape): parsed again under a new name next time, the old name
   * closed (closing a statement that does not exist is no error).
   */
  drop(s: Statement): void {
    if (this.pooler) return;
    if (s === this.claims) {
      this.generation++;
      this.claims = this.newClaims();
    } else {
      for (const [key, v] of this.statements) {
        if (v === s) {
          this.statements.delete(key);
          break;
        }
      }
    }
    this.toClose.push(s.name);
  }

  /** Run `work` with `claims` (JSON text) and `timeout` (null: the session's) in one unit. */
  run<R extends Row>(claims: string, timeout: string | null, work: LaneQuery, requestId: string | null = null): Promise<Rows<R>> {
    return new Promise<Rows<R>>((resolve, reject) => {
      this.send(new Unit(this, claims, timeout, work, resolve as (rows: Rows) => void, reject, false, requestId));
    });
  }

  send(unit: Unit): void {
    if (this.closed) {
      unit.handleError(new LaneError('the request lane connection is closed', 'CONNECTION_CLOSED'));
      return;
    }
    this.inflight++;
    this.client.query(unit);
  }

  /** Write the unit's messages (called by pg when it sends the unit). */
  write(unit: Unit, wire: Wire): void {
    if (!this.corked) {
      // Units sent in this turn of the event loop leave together.
      this.corked = true;
      wire.stream.cork();
      setImmediate(this.uncork);
    }
    for (const name of this.toClose) wire.close({ type: 'S', name }, true);
    this.toClose = [];
    const claims = this.claims;
    if (!claims.parsed) {
      wire.parse({ name: claims.name, text: CLAIMS_SQL, types: CLAIMS_TYPES as unknown as string[] }, true);
      claims.parsed = !this.pooler;
      unit.parsedClaims = claims;
    }
    wire.bind({ statement: claims.name, values: [unit.claims, unit.timeout, unit.requestId] }, true);
    wire.execute({ portal: '' }, true);
    const s = this.statement(unit.work);
    unit.statement = s;
    if (!s.parsed) {
      wire.parse({ name: s.name, text: unit.work.text, types: unit.work.types as unknown as string[] }, true);
      s.parsed = !this.pooler;
      unit.parsedWork = true;
    }
    wire.bind({ statement: s.name, values: unit.work.values as string[] }, true);
    if (s.columns === null) wire.describe({ type: 'P', name: '' }, true);
    else unit.columns = s.columns;
    wire.execute({ portal: '' }, true);
    wire.sync();
  }

  done(): void {
    this.inflight--;
  }

  end(): Promise<void> {
    this.closed = true;
    return this.client.end().catch(() => {});
  }
}

/**
 * One request as pg sees it (a Submittable): its messages (`LaneConnection.write`), then the
 * replies to them: the claims statement's, the work's, one ReadyForQuery. It derives from
 * pg's Query only because pipeline mode sends nothing else (it refuses query classes that
 * keep a portal open across round trips; a unit ends in its Sync like a Query); every method
 * pg calls on it is defined here.
 */
class Unit extends (pg.Query as unknown as new (config: { text: string }) => object) {
  readonly lane: LaneConnection;
  readonly claims: string;
  readonly timeout: string | null;
  readonly work: LaneQuery;
  readonly requestId: string | null;
  private readonly resolve: (rows: Rows) => void;
  private readonly reject: (err: unknown) => void;
  private readonly retried: boolean;
  /** The claims statement's reply comes first; then the work's. */
  private claimsDone = false;
  statement: Statement | null = null;
  parsedWork = false;
  parsedClaims: Statement | null = null;
  columns: Array<[string, ((x: string) => unknown) | null]> | null = null;
  private readonly found: Row[] = [];
  private tag = '';
  private settled = false;

  constructor(
    lane: LaneConnection,
    claims: string,
    timeout: string | null,
    work: LaneQuery,
    resolve: (rows: Rows) => void,
    reject: (err: unknown) => void,
    retried: boolean,
    requestId: string | null,
  ) {
    super({ text: work.text });
    this.requestId = requestId;
    this.lane = lane;
    this.claims = claims;
    this.timeout = timeout;
    this.work = work;
    this.resolve = resolve;
    this.reject = reject;
    this.retried = retried;
  }

  submit(connection: pg.Connection): Error | null {
    this.lane.write(this, connection);
    return null;
  }

  handleRowDescription(msg: { fields: Array<{ name: string; dataTypeID: number }> }): void {
    const columns = msg.fields.map((f): [string, ((x: string) => unknown) | null] => [f.name, parserFor(f.dataTypeID)]);
    this.columns = columns;
    if (this.statement && this.statement.name !== '') this.statement.columns = columns;
  }

  handleDataRow(msg: { fields: Array<string | null> }): void {
    if (!this.claimsDone) return; // the claims statement's row: no columns
    const columns = this.columns!;
    const row: Row = {};
    for (let i = 0; i < columns.length; i++) {
      const [name, parse] = columns[i];
      const x = msg.fields[i];
      row[name] = x === null ? null : parse ? parse(x) : x;
    }
    this.found.push(row);
  }

  handleCommandComplete(msg: { text: string }): void {
    if (!this.claimsDone) {
      this.claimsDone = true;
      return;
    }
    this.tag = msg.text;
  }

  handleEmptyQuery(): void {}

  handlePortalSuspended(): void {}

  handleError(err: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.lane.done();
    const e = LaneError.of(err);
    // A FATAL error (the backend terminated, 57P01 …) ends the session: the server closes the
    // socket next. The connection takes no more units from now, not only once its end event
    // has come (a unit sent in between would meet a reset socket instead).
    if (e.severity === 'FATAL' || e.severity === 'PANIC') this.lane.closed = true;
    // A statement this unit parsed and that may not exist now (its reply did not come as far
    // as its description) is parsed afresh by the next unit.
    if (this.parsedClaims && !this.claimsDone) this.lane.drop(this.parsedClaims);
    if (this.parsedWork && this.statement && this.columns === null) this.lane.drop(this.statement);
    // Nothing of this unit ran (its implicit transaction failed): once more, parsed again.
    if (!this.retried && !this.lane.closed && (e.routine === 'FetchPreparedStatement' || e.routine === 'RevalidateCachedQuery')) {
      if (e.routine === 'FetchPreparedStatement') this.lane.forgetAll();
      else if (this.claimsDone && this.statement && !this.parsedWork) this.lane.drop(this.statement);
      this.lane.send(new Unit(this.lane, this.claims, this.timeout, this.work, this.resolve, this.reject, true, this.requestId));
      return;
    }
    this.reject(e);
  }

  handleReadyForQuery(): void {
    if (this.settled) return;
    this.settled = true;
    // Described and no row description came (NoData): a statement without columns.
    if (this.statement && this.statement.name !== '' && this.statement.columns === null) this.statement.columns = [];
    this.lane.done();
    const rows = this.found as Rows;
    const space = this.tag.indexOf(' ');
    rows.command = space < 0 ? this.tag : this.tag.slice(0, space);
    const count = Number(this.tag.slice(this.tag.lastIndexOf(' ') + 1));
    rows.count = Number.isFinite(count) ? count : rows.length;
    this.resolve(rows);
  }
}
