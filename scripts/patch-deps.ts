/**
 * `postinstall`: five repairs to the postgres driver (porsager/postgres 3.4.9, pinned),
 * applied to its ESM and CJS builds. Upstream has 1–4 as open pull requests
 * (porsager/postgres#1168, #1209); drop each when a release carries it.
 *
 * 1. `closed()` and `terminate()` cancel the batched-write immediate without forgetting it,
 *    and keep the unsent bytes: a connection whose socket closes with a write pending can
 *    never write again (`write()` only arms the immediate when none is armed), so every
 *    reconnect of that pool slot ends in CONNECT_TIMEOUT and its queries wait forever.
 *    Seen here: a request lane killed while the next request was being written hung.
 * 2. `nextWrite()` with no socket threw from an immediate (an uncatchable TypeError that ends
 *    the process); it now rejects the connection's queries with CONNECTION_CLOSED.
 * 3. `closed()` after an 'error' event left in flight what was sent between that event and
 *    the close (the pool still counts the connection busy), and kept the query in flight and
 *    its error across the reconnect: the new connection took the next ReadyForQuery for
 *    those stale queries and never became idle again. Every query still in flight now fails
 *    with CONNECTION_CLOSED, and nothing of the old connection's reply state survives it.
 *    Seen here: a lane killed mid-burst stopped answering, every request on it waiting.
 * 4. The array-type query a new connection runs first rejected unobserved when that
 *    connection was lost (an unhandled rejection: with Node's default, the process ends);
 *    the next connection fetches the types again, so its failure is dropped.
 *
 * 5. Closures made per query or per reserved connection were written as function literals
 *    assigned straight to a property (`this.resolve = x => …`). V8's parser marks such a
 *    literal as long-lived (a method being defined) and allocates every closure it makes in
 *    the old generation; from there each one keeps its scope alive, and so the query, its
 *    promise, its parameters and its result rows, through every young-generation collection
 *    until the next full one. Every query was promoted: 4–5 % of all allocation, young
 *    collections of 4–7 ms instead of about 1, a full collection every few seconds under
 *    load (the p99 tail of issue 11). The closures are now made first and then assigned.
 *
 * And one addition, not a repair: a query's `options.prelude` (bytes: protocol messages)
 * goes out right in front of its Bind, in the same unit (before its Sync). The request lanes
 * put the claims statement there (src/core/pipeline.ts): it runs in the same implicit
 * transaction as the work, always with it, retries included, and the driver sees one query.
 *
 * Idempotent; fails loudly when the driver's code is not the one these repairs were written
 * for (a driver update: check whether it still needs them).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const MARK = '/* plinth-patch */';
/** Marks the prelude addition (src/core/db.ts checks for it). */
const PRELUDE_MARK = '/* plinth-patch: prelude */';
const EXPECTED_VERSION = '3.4.9';

const connectionRepairs: Array<[string, string]> = [
  [
    `  function nextWrite(fn) {
    const x = socket.write(chunk, fn)`,
    `  function nextWrite(fn) {
    if (!socket) { ${MARK}
      chunk = nextWriteTimer = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      return false
    }
    const x = socket.write(chunk, fn)`,
  ],
  [
    `    clearImmediate(nextWriteTimer)
    if (socket) {`,
    `    clearImmediate(nextWriteTimer)
    chunk = nextWriteTimer = null ${MARK}
    if (socket) {`,
  ],
  [
    `    clearImmediate(nextWriteTimer)
    socket.removeListener('data', data)`,
    `    clearImmediate(nextWriteTimer)
    chunk = nextWriteTimer = null ${MARK}
    socket.removeListener('data', data)`,
  ],
  [
    `    if (initial)
      return reconnect()

    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))`,
    `    if (initial) { ${MARK}
      query && queryError(query, Errors.connection('CONNECTION_CLOSED', options, socket))
      query = errorResponse = null
      return reconnect()
    }

    ;(query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))
    query = errorResponse = null`,
  ],
  [
    `  function prepared(q) {
    return Buffer.concat([
      Bind(q.parameters, q.statement.types, q.statement.name, q.cursorName),`,
    `  function prepared(q) {
    return Buffer.concat([
      ...(q.options.prelude ? [q.options.prelude] : []), ${PRELUDE_MARK}
      Bind(q.parameters, q.statement.types, q.statement.name, q.cursorName),`,
  ],
  [
    `  async function fetchArrayTypes() {
    needsTypes = false`,
    `  function fetchArrayTypes() { ${MARK}
    return fetchArrayTypesOnce().catch(() => {})
  }

  async function fetchArrayTypesOnce() {
    needsTypes = false`,
  ],
];

/** Repair 5: closures made per query or per reservation, not assigned as literals (see above). */
const queryRepairs: Array<[string, string]> = [
  [
    `    this.resolve = x => (this.active = false, resolve(x))
    this.reject = x => (this.active = false, reject(x))`,
    `    const settle = x => (this.active = false, resolve(x)) ${MARK}
        , fail = x => (this.active = false, reject(x))
    this.resolve = settle
    this.reject = fail`,
  ],
];

const indexRepairs: Array<[string, string]> = [
  [
    `    move(c, reserved)
    c.reserved = () => queue.length
      ? c.execute(queue.shift())
      : move(c, reserved)
    c.reserved.release = true

    const sql = Sql(handler)
    sql.release = () => {
      c.reserved = null
      onopen(c)
    }`,
    `    move(c, reserved)
    const next = () => queue.length ${MARK}
      ? c.execute(queue.shift())
      : move(c, reserved)
    c.reserved = next
    c.reserved.release = true

    const sql = Sql(handler)
    const release = () => {
      c.reserved = null
      onopen(c)
    }
    sql.release = release`,
  ],
];

const root = join(import.meta.dirname, '..', 'node_modules', 'postgres');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };

const files: Array<[string, Array<[string, string]>]> = [
  ['connection.js', connectionRepairs],
  ['query.js', queryRepairs],
  ['index.js', indexRepairs],
];

for (const [name, repairs] of files) {
  for (const file of [`src/${name}`, `cjs/src/${name}`]) {
    const path = join(root, file);
    let text = readFileSync(path, 'utf8');
    const before = text;
    for (const [from, to] of repairs) {
      // Each change once: an install patched by an earlier version of this script gets the rest.
      if (text.includes(to)) continue;
      const at = text.indexOf(from);
      if (at < 0 || text.indexOf(from, at + 1) >= 0) {
        console.error(
          `scripts/patch-deps.ts: postgres ${version} (${file}) is not the code these repairs were written for ` +
            `(postgres ${EXPECTED_VERSION}); check whether the new release still needs them, then update this script.`,
        );
        process.exit(1);
      }
      text = text.slice(0, at) + to + text.slice(at + from.length);
    }
    if (text !== before) writeFileSync(path, text);
  }
}
