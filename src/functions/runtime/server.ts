/**
 * The bundled edge runtime: this file runs in Deno (not Node), started by
 * src/functions/supervisor.ts as
 *
 *   deno run --allow-net --allow-read=<FUNCTIONS_DIR> [--allow-env=<FUNCTIONS_ENV>] server.ts <FUNCTIONS_DIR>
 *
 * It serves `/<name>/…` from `<FUNCTIONS_DIR>/<name>/index.ts`, whose default export is
 * `(req: Request) => Response | Promise<Response>` (contract §6), on a loopback port of its
 * own, announced on stdout as one JSON line `{"plinth_edge_listening": <port>}`.
 *
 * - An edited `index.ts` is picked up on the next call: the module is imported again under
 *   a new URL (`?v=<mtime>`) when its modification time changes. Files it imports keep
 *   Deno's module cache until the runtime restarts.
 * - A function that throws (or does not load, or has no default-exported function) answers
 *   500 `{"error": "internal error"}`; the stack goes to stderr as one JSON line, which the
 *   supervisor writes to the service log. Never into the response.
 * - The runtime exits when its stdin closes: the service that started it is gone.
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
  exit(code: number): never;
};

type Handler = (req: Request) => Response | Promise<Response>;

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

async function handle(req: Request): Promise<Response> {
  const name = new URL(req.url).pathname.split('/')[1] ?? '';
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
    const res = await handler(req);
    if (!(res instanceof Response)) throw new TypeError(`${name} did not return a Response`);
    return res;
  } catch (err) {
    report(name, 'function threw', err);
    return json(500, { error: 'internal error' });
  }
}

Deno.serve(
  {
    hostname: '127.0.0.1',
    port: 0,
    onListen: ({ port }) => console.log(JSON.stringify({ plinth_edge_listening: port })),
  },
  handle,
);

// The parent holds our stdin open; when it goes away, so do we.
void (async () => {
  const buf = new Uint8Array(64);
  try {
    while ((await Deno.stdin.read(buf)) !== null) {
      /* nothing is sent on stdin */
    }
  } finally {
    Deno.exit(0);
  }
})();
