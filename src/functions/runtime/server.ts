/**
 * The bundled edge runtime: this file runs in Deno (not Node), started by
 * src/functions/supervisor.ts as
 *
 *   deno run --allow-net --deny-net=… --allow-read=<FUNCTIONS_DIR> [--allow-env=<FUNCTIONS_ENV>] server.ts <FUNCTIONS_DIR>
 *
 * with a secret as the first line of its stdin. It serves `/<name>/…` from
 * `<FUNCTIONS_DIR>/<name>/index.ts`, whose default export is
 * `(req: Request) => Response | Promise<Response>` (docs/api/functions.md), on a loopback port of its
 * own, announced on stdout as one JSON line `{"plinth_edge_listening": <port>}`.
 *
 * - Only plinth is served: a request without the secret in `x-plinth-runtime-secret`
 *   (compared in constant time) gets 401 `{"error": "invalid runtime secret"}`, since
 *   every local process can reach the port.
 * - Only the function plinth checked is served: `x-plinth-function` must equal the path's
 *   first segment, and the path must be what a URL parser keeps (no `.`/`..` segment, raw
 *   or encoded, no backslash); otherwise 400 `{"error": "invalid function path"}`.
 * - A function never sees the `x-plinth-*` headers.
 * - An edited `index.ts` is picked up on the next call: the module is imported again under
 *   a new URL (`?v=<mtime>`) when its modification time changes. Files it imports keep
 *   Deno's module cache until the runtime restarts.
 * - A function that throws (or does not load, or has no default-exported function) answers
 *   500 `{"error": "internal error"}`; the stack goes to stderr as one JSON line, which the
 *   supervisor writes to the service log. Never into the response.
 * - The runtime exits when its stdin closes: the service that started it is gone.
 * - While it serves, it writes a line `.` to stdout every 100 ms: the supervisor ends a
 *   process whose beat stops for longer than its CPU budget.
 */

// Deno's globals, as far as this file uses them (the repository type-checks with Node's types).
declare const Deno: {
  args: string[];
  stat(path: string): Promise<{ mtime: Date | null; isFile: boolean }>;
  serve(
    opts: { hostname: string; port: number; onListen?: (addr: { port: number }) => void },
    handler: (req: Request) => Response | Promise<Response>,
  ): unknown;
  stdin: { read(buf: Uint8Array): Promise<number | null> };
  stdout: { writeSync(buf: Uint8Array): number };
  exit(code: number): never;
};

type Handler = (req: Request) => Response | Promise<Response>;

const SECRET_HEADER = 'x-plinth-runtime-secret';
const FUNCTION_HEADER = 'x-plinth-function';

const DIR = Deno.args[0].replace(/\/+$/, '');
const NAME = /^[A-Za-z0-9_][A-Za-z0-9_-]*$/;
const loaded = new Map<string, { version: number; handler: Promise<Handler> }>();

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json; charset=utf-8' } });
}

function report(name: string, message: string, err: unknown): void {
  const stack = err instanceof Error ? (err.stack ?? String(err)) : String(err);
  console.error(JSON.stringify({ level: 'error', function: name, msg: message, stack }));
}

function fileUrl(path: string): string {
  return 'file://' + path.split('/').map(encodeURIComponent).join('/');
}

async function load(name: string, file: string, version: number): Promise<Handler> {
  const mod = (await import(`${fileUrl(file)}?v=${version}`)) as { default?: unknown };
  if (typeof mod.default !== 'function') throw new TypeError(`${name}/index.ts has no default-exported function`);
  return mod.default as Handler;
}

/** Equal strings, in time that depends on the length of `expected` only. */
function safeEqual(given: string, expected: string): boolean {
  const a = new TextEncoder().encode(given);
  const b = new TextEncoder().encode(expected);
  let diff = a.length ^ b.length;
  for (let i = 0; i < b.length; i++) diff |= (a[i % (a.length || 1)] ?? 0) ^ b[i];
  return diff === 0;
}

/** The path as sent on the request line (no query). */
function rawPath(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2);
  const q = url.indexOf('?', start);
  return start < 0 ? '/' : url.slice(start, q < 0 ? undefined : q);
}

/** The request a function gets: the same, without the `x-plinth-*` headers. */
function withoutInternalHeaders(req: Request): Request {
  const headers = new Headers();
  req.headers.forEach((v, k) => {
    if (!k.startsWith('x-plinth-')) headers.append(k, v);
  });
  return new Request(req, { headers });
}

async function handle(req: Request, secret: string): Promise<Response> {
  if (!safeEqual(req.headers.get(SECRET_HEADER) ?? '', secret)) return json(401, { error: 'invalid runtime secret' });
  const raw = rawPath(req.url);
  const name = raw.split('/')[1] ?? '';
  if (raw !== new URL(req.url).pathname || req.headers.get(FUNCTION_HEADER) !== name) {
    return json(400, { error: 'invalid function path' });
  }
  if (!NAME.test(name)) return json(404, { error: 'function not found' });
  const file = `${DIR}/${name}/index.ts`;
  let version: number;
  try {
    const st = await Deno.stat(file);
    if (!st.isFile) return json(404, { error: 'function not found' });
    version = st.mtime?.getTime() ?? 0;
  } catch {
    return json(404, { error: 'function not found' });
  }
  let entry = loaded.get(name);
  if (entry === undefined || entry.version !== version) {
    entry = { version, handler: load(name, file, version) };
    loaded.set(name, entry);
  }
  let handler: Handler;
  try {
    handler = await entry.handler;
  } catch (err) {
    report(name, 'function failed to load', err);
    return json(500, { error: 'internal error' });
  }
  try {
    const res = await handler(withoutInternalHeaders(req));
    if (!(res instanceof Response)) throw new TypeError(`${name} did not return a Response`);
    return res;
  } catch (err) {
    report(name, 'function threw', err);
    return json(500, { error: 'internal error' });
  }
}

/** Serve with `secret`; a runtime that cannot listen says why (stderr) and exits 1. */
function serve(secret: string): void {
  try {
    Deno.serve(
      {
        hostname: '127.0.0.1',
        port: 0,
        onListen: ({ port }) => console.log(JSON.stringify({ plinth_edge_listening: port })),
      },
      (req) => handle(req, secret),
    );
  } catch (err) {
    report('', 'the edge runtime could not listen', err);
    Deno.exit(1);
  }
}

// The first line of stdin is the secret (without one, nothing is served); then the parent
// holds stdin open, and when it goes away, so do we.
void (async () => {
  const buf = new Uint8Array(256);
  const bytes: number[] = [];
  let serving = false;
  try {
    for (;;) {
      const n = await Deno.stdin.read(buf);
      if (n === null) break;
      if (serving) continue;
      bytes.push(...buf.subarray(0, n));
      const nl = bytes.indexOf(10);
      if (nl < 0) continue;
      const secret = new TextDecoder().decode(new Uint8Array(bytes.slice(0, nl))).trim();
      if (secret.length < 32) {
        report('', 'the edge runtime got no secret on stdin', new Error('a secret of at least 32 characters is the first line of stdin'));
        Deno.exit(1);
      }
      serving = true;
      serve(secret);
      // The beat the supervisor's watchdog listens for: it stops when a function holds the
      // event loop (an endless loop), and the supervisor ends this process.
      const beat = new TextEncoder().encode('.\n');
      setInterval(() => Deno.stdout.writeSync(beat), 100);
    }
  } finally {
    Deno.exit(0);
  }
})();
