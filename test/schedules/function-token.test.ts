/**
 * The credential a `function:` target gets, with the bundled Deno runtime: a schedule and a
 * queue call a real function, which reports the headers it received to a loopback server.
 * It must see a token whose role is service_role, whose `schedule` (or `queue`) claim names
 * its caller and whose exp is minutes away, never the ten-year service-role key; the token
 * works against plinth for its few minutes, as the key did.
 */
import t from 'tap';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { waitFor } from '../functions/helpers.ts';
import { RUN_TOKEN_TTL_S, RunTokens } from '../../src/schedules/token.ts';

const dir = mkdtempSync(join(tmpdir(), 'plinth-run-token-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
mkdirSync(join(dir, 'report_headers'));
writeFileSync(
  join(dir, 'report_headers', 'index.ts'),
  `export default async (req: Request): Promise<Response> => {
  const { report } = await req.json() as { report: string };
  const h = (k: string) => req.headers.get(k);
  const seen = { authorization: h('authorization'), apikey: h('apikey'), caller: h('x-caller-claims'), kind: h('x-job-kind'), name: h('x-job-name') };
  const res = await fetch(report, { method: 'POST', body: JSON.stringify(seen) });
  return Response.json({ reported: res.status });
};
`,
);

interface Seen {
  authorization: string | null;
  apikey: string | null;
  caller: string | null;
  kind: string | null;
  name: string | null;
}
const seen: Seen[] = [];
const recorder = createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (body += c));
  req.on('end', () => {
    seen.push(JSON.parse(body) as Seen);
    res.end('ok');
  });
});
await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => recorder.close(() => resolve())));
const report = `http://127.0.0.1:${(recorder.address() as AddressInfo).port}/`;

const db = await createTestDatabase(t);
await db.sql`insert into edge.functions (name, runtime, verify_jwt) values ('report_headers', 'deno', true)`;
await db.sql`select plinth.schedule('nightly_report', '@daily', 'function:report_headers', ${JSON.stringify({ report })}::text::jsonb)`;
await db.sql`select plinth.queue('mailer', 'function:report_headers')`;
const app = await startApp(t, { db, env: { FUNCTIONS_DIR: dir } });

const payloadOf = (jwt: string): Record<string, unknown> => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString('utf8')) as Record<string, unknown>;

t.test('a schedule and a queue call their function with a short-lived token naming them, not the service-role key', async (t) => {
  t.equal((await app.call('POST', '/api/schedules/nightly_report/run', { token: app.serviceKey })).status, 202, 'the schedule runs now');
  t.equal((await app.call('POST', '/api/queues/mailer', { token: app.serviceKey, body: { payload: { report } } })).status, 202, 'a job is queued');
  t.ok(await waitFor(() => seen.length >= 2, 30_000, 50), 'the function reported twice');
  for (const [kind, name] of [['schedule', 'nightly_report'], ['queue', 'mailer']] as const) {
    const s = seen.find((x) => x.kind === kind);
    if (s === undefined) {
      t.fail(`no call from the ${kind}`);
      continue;
    }
    t.equal(s.name, name, `${kind}: x-job-name`);
    t.not(s.authorization, `Bearer ${app.serviceKey}`, `${kind}: Authorization is not the service-role key`);
    t.not(s.apikey, app.serviceKey, `${kind}: apikey is not the service-role key`);
    const token = /^Bearer (\S+)$/.exec(s.authorization ?? '')?.[1] ?? '';
    const claims = payloadOf(token);
    t.equal(claims.role, 'service_role', `${kind}: role service_role`);
    t.equal(claims[kind], name, `${kind}: the claim names it`);
    t.equal(claims.sub, undefined, `${kind}: no user`);
    const left = (claims.exp as number) - Date.now() / 1000;
    t.ok(left > 60 && left <= 10 * 60, `${kind}: exp is minutes away (${Math.round(left)} s)`);
    t.equal(s.apikey, token, `${kind}: apikey is the same token`);
    t.equal((JSON.parse(s.caller ?? 'null') as Record<string, unknown> | null)?.[kind], name, `${kind}: the verified caller claims name it`);
    t.equal((await app.call('GET', '/api/schedules', { token })).status, 200, `${kind}: the token passes a service-role route while it lives`);
  }
});

t.test('a token lives five minutes plus the run timeout, and is given again while enough of it remains', async (t) => {
  const tokens = new RunTokens('a-secret-for-this-test-only-0123456789abcdef');
  const now = 1_800_000_000;
  const first = await tokens.get('queue', 'q', 60_000, now);
  t.equal(payloadOf(first).exp, now + RUN_TOKEN_TTL_S + 60, 'exp: five minutes plus the timeout');
  t.equal(await tokens.get('queue', 'q', 60_000, now + 240), first, 'given again while the timeout plus a minute remains');
  const second = await tokens.get('queue', 'q', 60_000, now + 241);
  t.not(second, first, 'a fresh one after that');
  t.not(await tokens.get('schedule', 'q', 60_000, now + 241), second, 'one per schedule or queue');
  t.equal(payloadOf(await tokens.get('schedule', 'long', 3_600_000, now)).exp, now + RUN_TOKEN_TTL_S + 3600, 'a long run: its timeout more');
});
