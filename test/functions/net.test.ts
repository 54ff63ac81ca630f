/**
 * What the bundled runtime's functions may reach on the network, against a real plinth and
 * the bundled Deno. A function tries PostgreSQL's port and plinth's own port in every
 * spelling (it reports the error it got), an ordinary loopback server the test starts
 * (which works), and asks Deno about link-local metadata addresses (no packet is sent
 * there). Every other database address plinth is given (a direct URL, replicas, the root
 * and shadow URLs: loopback proxies to PostgreSQL here) and the metrics listener are
 * denied as well. FUNCTIONS_ALLOW_NET narrows what is allowed (and an entry with a port lifts the
 * default denial of that port); FUNCTIONS_DENY_NET adds denials.
 */
import t from 'tap';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { startProxy } from '../helpers/proxy.ts';
import { closedPort } from './helpers.ts';
import { netFlags, postgresTargets } from '../../src/functions/net.ts';

const dir = mkdtempSync(join(tmpdir(), 'plinth-functions-net-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
mkdirSync(join(dir, 'probe'));
writeFileSync(
  join(dir, 'probe', 'index.ts'),
  `
const outcome = (e: unknown): string => {
  const err = e as Error & { cause?: Error };
  // Deno.connect throws NotCapable; fetch throws a TypeError whose cause it is when a name resolved to a denied address.
  return err.name === 'NotCapable' || err.cause?.name === 'NotCapable' ? 'NotCapable' : \`\${err.name}: \${err.message}\`;
};
export default async (req: Request): Promise<Response> => {
  const { fetch: urls = [], connect = [], query = [] } = await req.json() as { fetch?: string[]; connect?: { hostname: string; port: number }[]; query?: string[] };
  const out: Record<string, string> = {};
  for (const url of urls) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
      out['fetch ' + url] = 'ok ' + res.status + ' ' + (await res.text());
    } catch (e) { out['fetch ' + url] = outcome(e); }
  }
  for (const target of connect) {
    try {
      const conn = await Deno.connect(target);
      conn.close();
      out['connect ' + target.hostname + ':' + target.port] = 'ok';
    } catch (e) { out['connect ' + target.hostname + ':' + target.port] = outcome(e); }
  }
  for (const host of query) out['permission ' + host] = (await Deno.permissions.query({ name: 'net', host })).state;
  return Response.json(out);
};
`,
);

/** An ordinary loopback HTTP server a function may call. */
async function tinyServer(answer: string): Promise<{ port: number; server: Server }> {
  const server = createServer((_req, res) => res.end(answer));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as AddressInfo).port, server };
}
const allowed = await tinyServer('hello from loopback');
const other = await tinyServer('another loopback server');

const db = await createTestDatabase(t);
await db.sql`insert into edge.functions (name, runtime, verify_jwt) values ('probe', 'deno', false)`;
const dbUrl = new URL(db.url);
const dbPort = Number(dbUrl.port || 5432);

async function probe(app: TestApp, body: object): Promise<Record<string, string>> {
  const r = await app.call('POST', '/functions/v1/probe', { body });
  if (r.status !== 200) throw new Error(`probe answered ${r.status}: ${r.text}`);
  return r.body as Record<string, string>;
}

/** Every spelling that reaches `port` on this machine. */
const spellings = (port: number) => [
  { hostname: '127.0.0.1', port },
  { hostname: 'localhost', port },
  { hostname: '::1', port },
  { hostname: '0.0.0.0', port },
  { hostname: '127.0.0.2', port },
  { hostname: '::ffff:127.0.0.1', port },
];

t.test('by default: not the database, not plinth itself, not link-local; an ordinary loopback server, yes', async (t) => {
  const app = await startApp(t, { db, env: { FUNCTIONS_DIR: dir } });
  const plinthPort = Number(new URL(app.url).port);
  const out = await probe(app, {
    connect: [...spellings(dbPort), { hostname: dbUrl.hostname, port: dbPort }, ...spellings(plinthPort)],
    fetch: [
      `http://127.0.0.1:${plinthPort}/health`,
      `http://localhost:${plinthPort}/health`,
      `http://[::1]:${plinthPort}/health`,
      `http://0.0.0.0:${plinthPort}/health`,
      `http://127.0.0.1:${allowed.port}/`,
    ],
    query: ['169.254.169.254:80', '169.254.0.1', '[fd00:ec2::254]:80', `127.0.0.1:${allowed.port}`],
  });
  for (const s of spellings(dbPort)) t.equal(out[`connect ${s.hostname}:${dbPort}`], 'NotCapable', `PostgreSQL's port via ${s.hostname}`);
  t.equal(out[`connect ${dbUrl.hostname}:${dbPort}`], 'NotCapable', 'PostgreSQL as DATABASE_URL names it');
  for (const s of spellings(plinthPort)) t.equal(out[`connect ${s.hostname}:${plinthPort}`], 'NotCapable', `plinth's port via ${s.hostname}`);
  for (const h of ['127.0.0.1', 'localhost', '[::1]', '0.0.0.0']) {
    t.equal(out[`fetch http://${h}:${plinthPort}/health`], 'NotCapable', `fetch of plinth's /health via ${h}`);
  }
  t.equal(out[`fetch http://127.0.0.1:${allowed.port}/`], 'ok 200 hello from loopback', 'an ordinary loopback server answers');
  t.equal(out['permission 169.254.169.254:80'], 'denied', 'the metadata address');
  t.equal(out['permission 169.254.0.1'], 'denied', 'all of 169.254.0.0/16');
  t.equal(out['permission [fd00:ec2::254]:80'], 'denied', "AWS's IPv6 metadata address");
  t.equal(out[`permission 127.0.0.1:${allowed.port}`], 'granted', 'while an ordinary port is granted');
});

t.test('every database address plinth is given, and the metrics port: denied in every local spelling', async (t) => {
  const proxies: Record<string, number> = {};
  for (const name of ['DATABASE_URL', 'DATABASE_DIRECT_URL', 'DATABASE_READ_URL', 'ROOT_DATABASE_URL', 'SHADOW_DATABASE_URL']) {
    const p = await startProxy(dbUrl.hostname, dbPort);
    t.teardown(() => p.close());
    proxies[name] = p.port;
  }
  const via = (port: number) => {
    const u = new URL(db.url);
    u.host = `127.0.0.1:${port}`;
    return u.toString();
  };
  const env: Record<string, string> = { FUNCTIONS_DIR: dir, METRICS_PORT: '0' };
  for (const [name, port] of Object.entries(proxies)) env[name] = via(port);
  const app = await startApp(t, { db, databaseUrl: env.DATABASE_URL, env });
  const metricsPort = Number(new URL(app.service.metricsUrl!).port);
  t.equal((await fetch(`${app.service.metricsUrl}/metrics`)).status, 200, 'the metrics listener is up');
  const out = await probe(app, {
    connect: [...Object.values(proxies).flatMap(spellings), ...spellings(metricsPort)],
    fetch: [`http://127.0.0.1:${metricsPort}/metrics`, `http://localhost:${metricsPort}/metrics`, `http://127.0.0.1:${allowed.port}/`],
  });
  for (const [name, port] of Object.entries(proxies)) {
    for (const s of spellings(port)) t.equal(out[`connect ${s.hostname}:${port}`], 'NotCapable', `${name} via ${s.hostname}`);
  }
  for (const s of spellings(metricsPort)) t.equal(out[`connect ${s.hostname}:${metricsPort}`], 'NotCapable', `METRICS_PORT via ${s.hostname}`);
  t.equal(out[`fetch http://127.0.0.1:${metricsPort}/metrics`], 'NotCapable', 'fetch of /metrics');
  t.equal(out[`fetch http://localhost:${metricsPort}/metrics`], 'NotCapable', 'fetch of /metrics via localhost');
  t.equal(out[`fetch http://127.0.0.1:${allowed.port}/`], 'ok 200 hello from loopback', 'an ordinary loopback server still answers');
});

t.test('FUNCTIONS_ALLOW_NET narrows to a list; an entry naming a denied port opens it on purpose', async (t) => {
  const port = await closedPort();
  const app = await startApp(t, {
    db,
    env: { FUNCTIONS_DIR: dir, PORT: String(port), FUNCTIONS_ALLOW_NET: `127.0.0.1:${allowed.port},localhost:${port}` },
  });
  const out = await probe(app, {
    fetch: [`http://127.0.0.1:${allowed.port}/`, `http://127.0.0.1:${other.port}/`, `http://localhost:${port}/health`],
    connect: [{ hostname: '127.0.0.1', port: dbPort }],
  });
  t.equal(out[`fetch http://127.0.0.1:${allowed.port}/`], 'ok 200 hello from loopback', 'a listed address');
  t.equal(out[`fetch http://127.0.0.1:${other.port}/`], 'NotCapable', 'an address not listed');
  t.match(out[`fetch http://localhost:${port}/health`], /^ok 200 /, "plinth's own port, listed on purpose");
  t.equal(out[`connect 127.0.0.1:${dbPort}`], 'NotCapable', 'the database stays denied');
});

t.test('FUNCTIONS_DENY_NET adds denials', async (t) => {
  const app = await startApp(t, { db, env: { FUNCTIONS_DIR: dir, FUNCTIONS_DENY_NET: `127.0.0.1:${allowed.port}` } });
  const out = await probe(app, { fetch: [`http://127.0.0.1:${allowed.port}/`, `http://127.0.0.1:${other.port}/`] });
  t.equal(out[`fetch http://127.0.0.1:${allowed.port}/`], 'NotCapable');
  t.equal(out[`fetch http://127.0.0.1:${other.port}/`], 'ok 200 another loopback server', 'others stay open');
});

t.test("Deno's flags for a policy", async (t) => {
  const local = ['127.0.0.1', '::1', '10.1.2.3', 'fe80::1'];
  const flags = netFlags({ allow: null, deny: ['example.org'] }, [8000], [{ host: 'db.internal', port: 5432 }, { host: '10.9.9.9', port: 5432 }], local);
  t.equal(flags[0], '--allow-net', 'any host by default');
  const deny = flags[1].replace(/^--deny-net=/, '').split(',');
  for (const e of ['127.0.0.0/8:8000', '0.0.0.0:8000', '[::1]:8000', '[::]:8000', 'localhost:8000', '10.1.2.3:8000', '[fe80::1]:8000']) {
    t.ok(deny.includes(e), `plinth's port: ${e}`);
  }
  t.ok(deny.includes('db.internal:5432') && deny.includes('10.9.9.9:5432'), 'a database elsewhere: its name and address');
  t.notOk(deny.includes('127.0.0.0/8:5432'), 'and not the port on this machine');
  t.ok(deny.includes('169.254.0.0/16') && deny.includes('[fd00:ec2::254]') && deny.includes('example.org'), 'link-local and FUNCTIONS_DENY_NET');
  const onThisMachine = netFlags({ allow: null, deny: [] }, [8000], [{ host: '10.1.2.3', port: 5433 }], local);
  t.ok(onThisMachine[1].includes('127.0.0.0/8:5433') && onThisMachine[1].includes('localhost:5433'), 'a database at a local address: every local spelling');
  t.same(netFlags({ allow: [], deny: [] }, [8000], [], local).filter((f) => f.startsWith('--allow-net')), ['--allow-net=127.0.0.1:0'], 'none: nothing but the runtime\'s own listening socket');
  t.equal(netFlags({ allow: ['api.example.com', '10.0.0.0/8:443'], deny: [] }, [8000], [], local)[0], '--allow-net=127.0.0.1:0,api.example.com,10.0.0.0/8:443', 'a list');
  const listed = netFlags({ allow: ['*', 'localhost:8000'], deny: [] }, [8000], [], local);
  t.equal(listed[0], '--allow-net', '* keeps any host');
  t.notOk(listed[1].includes(':8000'), 'a local spelling of a denied port lifts its default denials');
  const elsewhere = netFlags({ allow: ['*', 'api.example.com:8000', '10.0.0.0/8:8000'], deny: [] }, [8000], [], local);
  t.ok(elsewhere[1].includes('127.0.0.0/8:8000'), 'another host on the same port, or a range, lifts nothing');
  const db = netFlags({ allow: ['*', 'db.internal:5432'], deny: [] }, [8000], [{ host: 'db.internal', port: 5432 }, { host: '10.9.9.9', port: 5432 }], local);
  t.notOk(db[1].includes(':5432'), "naming the database's host lifts its denials, addresses included");
});

t.test('the host:port pairs of a PostgreSQL URL', async (t) => {
  t.same(postgresTargets('postgres://u:p@db.internal:6543/app'), [{ host: 'db.internal', port: 6543 }]);
  t.same(postgresTargets('postgresql://u:p%40ss@10.0.0.5/app?sslmode=require'), [{ host: '10.0.0.5', port: 5432 }], 'the default port');
  t.same(postgresTargets('postgres://u:p@h1:5433,[::1]:5434,h3/app'), [{ host: 'h1', port: 5433 }, { host: '::1', port: 5434 }, { host: 'h3', port: 5432 }], 'several hosts, IPv6 in brackets');
  t.same(postgresTargets('postgres://u@:7777/app'), [{ host: 'localhost', port: 7777 }], 'no host: localhost');
  t.same(postgresTargets('postgres://u@%2Fvar%2Frun%2Fpostgresql/app'), [], 'a Unix socket is left out');
  t.same(
    sortedTargets(postgresTargets('postgres:///app?host=replica.internal,10.1.1.1&port=5440,5441')),
    sortedTargets([{ host: 'localhost', port: 5432 }, { host: 'replica.internal', port: 5440 }, { host: '10.1.1.1', port: 5441 }]),
    'host= and port= parameters',
  );
  t.same(postgresTargets('postgres://u@h1/app?port=6000'), [{ host: 'h1', port: 5432 }, { host: 'h1', port: 6000 }], 'port= alone: both denied');
});

function sortedTargets(l: Array<{ host: string; port: number }>) {
  return [...l].sort((a, b) => `${a.host}:${a.port}`.localeCompare(`${b.host}:${b.port}`));
}
