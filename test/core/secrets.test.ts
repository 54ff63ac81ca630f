/**
 * What a real plinth prints and logs keeps its secrets (security: stdout and logs are read
 * by more people and systems than the keys are meant for):
 * - a start with DATABASE_URL and JWT_SECRET set, keys configured, prints fingerprints of
 *   the keys, never the keys;
 * - at LOG_LEVEL=debug the request lines carry no `token`, `apikey`, `code` or `state`
 *   values, and nothing on any line carries a live link's token (mails without SMTP_URL);
 * - the logger's backstop: mail bodies and links, and `token=` in URLs anywhere on a line,
 *   are censored outside development mode, and left for the developer in it.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { SignJWT } from 'jose';
import WebSocket from 'ws';
import { createLogger } from '../../src/core/log.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { TEST_JWT_SECRET } from '../helpers/app.ts';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const KEY = new TextEncoder().encode(TEST_JWT_SECRET);

const sign = (claims: Record<string, unknown>) =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt().setExpirationTime('10y').sign(KEY);

async function waitFor(cond: () => boolean | Promise<boolean>, what: () => string, ms = 60_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`not met in time: ${what()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const fingerprint = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 8);

t.test('a production start: no key on stdout, no secret in the debug log', { timeout: 120_000 }, async (t) => {
  const db = await createTestDatabase(t);
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-secrets-'));
  const anonKey = await sign({ role: 'anon' });
  const serviceKey = await sign({ role: 'service_role' });
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: db.url,
      MIGRATE_ON_START: 'false',
      JWT_SECRET: TEST_JWT_SECRET,
      ANON_KEY: anonKey,
      SERVICE_ROLE_KEY: serviceKey,
      REQUIRE_EMAIL_VERIFICATION: 'true',
      AUTH_RATE_LIMIT: '0',
      HOST: '127.0.0.1',
      PORT: '0',
      DATA_DIR: dataDir,
      DB_POOL_SIZE: '2',
      LOG_LEVEL: 'debug',
    },
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });
  await waitFor(() => /plinth listening on \S+\n/.test(out) && /SERVICE_ROLE_KEY\b.*\n/.test(out), () => out);
  const url = /plinth listening on (\S+)/.exec(out)![1];

  // The banner.
  const banner = out.split('\n').filter((l) => !l.startsWith('{'));
  t.ok(banner.includes(`ANON_KEY sha256:${fingerprint(anonKey)}`), 'the anon key as a fingerprint');
  t.ok(banner.includes(`SERVICE_ROLE_KEY sha256:${fingerprint(serviceKey)}`), 'the service-role key as a fingerprint');
  t.notOk(out.includes(serviceKey), 'the service-role key is not printed');
  t.notOk(out.includes(anonKey), 'the anon key is not printed');
  t.notOk(out.includes(TEST_JWT_SECRET), 'nor the secret');

  // Requests whose URLs carry credentials.
  const email = `secrets-${Date.now()}@example.com`;
  const calls: Array<[string, RequestInit?]> = [
    [`/rest/v1/nowhere?select=*&token=secret123&apikey=${anonKey}`],
    ['/auth/v1/magiclink/verify?token=secret456&type=magiclink'],
    ['/auth/v1/callback?code=c0de789&state=st4te012'],
    [`/ws/_presence/lobby?apikey=${serviceKey}&access_token=secret345`],
    ['/auth/v1/signup', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'correct horse battery' }) }],
    ['/auth/v1/magiclink', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email }) }],
  ];
  for (const [path, init] of calls) await (await fetch(url + path, { redirect: 'manual', ...init })).arrayBuffer();
  await new Promise<void>((resolve) => {
    const ws = new WebSocket(url.replace(/^http/, 'ws') + '/ws/nowhere?token=secret678');
    ws.on('unexpected-response', (_req, res) => {
      res.resume();
      res.on('end', () => resolve());
    });
    ws.on('error', () => resolve());
  });

  // Every request line logged; the emails (sent to the log: SMTP_URL is unset) handled.
  await waitFor(
    () => calls.every(([path]) => out.includes(`"url":"${path.split('?')[0]}`)) && out.includes('"url":"/ws/nowhere?'),
    () => `request lines: ${out}`,
  );
  await waitFor(
    async () => {
      const [{ n }] = await db.sql`select count(*)::int as n from graphile_worker._private_jobs j
        join graphile_worker._private_tasks k on k.id = j.task_id where k.identifier = 'auth__send_email'`;
      const [{ made }] = await db.sql`select count(*)::int as made from graphile_worker._private_tasks where identifier = 'auth__send_email'`;
      return made > 0 && n === 0;
    },
    () => 'the email jobs to complete',
  );
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));

  const lines = out.split('\n').filter((l) => l.startsWith('{'));
  const requestLines = lines.filter((l) => l.includes('"incoming request"'));
  t.ok(requestLines.some((l) => l.includes('/rest/v1/nowhere?select=*&token=[redacted]&apikey=[redacted]')), 'the request line is logged, its secrets replaced');
  t.ok(requestLines.some((l) => l.includes('/auth/v1/callback?code=[redacted]&state=[redacted]')), 'code and state replaced');
  for (const [what, secret] of Object.entries({ secret123: 'secret123', secret456: 'secret456', c0de789: 'c0de789', st4te012: 'st4te012', secret345: 'secret345', secret678: 'secret678', 'the anon key': anonKey, 'the service-role key': serviceKey })) {
    t.notOk(out.includes(secret), `${what} appears nowhere in the output`);
  }
  const leaked = lines.filter((l) => /[?&#;](token|token_hash|access_token|refresh_token|code|state|apikey)=(?!\[redacted\])/.test(l));
  t.same(leaked, [], 'no log line carries a URL credential, the emailed links included');
});

/** A logger writing to memory: the lines it would print. */
function capture(development: boolean) {
  const lines: any[] = [];
  const destination = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l));
      done();
    },
  });
  return { log: createLogger('info', { development, destination }), lines };
}

t.test("the logger's backstop", async (t) => {
  const link = 'http://127.0.0.1:8000/auth/v1/verify?token=4b1d3f2c9e&type=signup';
  const prod = capture(false);
  prod.log.info({ email: { to: 'ada@example.com', subject: 'Confirm', body: `Open ${link}` } }, 'email');
  prod.log.info({ mail: { text: `Open ${link}`, html: `<a href="${link.replace('&', '&amp;')}">Open</a>`, link } }, 'mail');
  prod.log.info({ link }, 'a link field');
  prod.log.info({ job: { payload: { note: `see ${link}` } } }, `a message with ${link}`);
  prod.log.info({ to: 'https://app.test/#access_token=eyJabc&refresh_token=r3fr&type=recovery' }, 'redirect');
  t.same(prod.lines[0].email, { to: 'ada@example.com', subject: 'Confirm', body: '[redacted]' }, 'a mail body is censored, the address and subject kept');
  t.same(prod.lines[1].mail, { text: '[redacted]', html: '[redacted]', link: '[redacted]' }, 'text, html and link of a mail object');
  t.equal(prod.lines[2].link, '[redacted]', 'a link field');
  t.equal(prod.lines[3].job.payload.note, 'see http://127.0.0.1:8000/auth/v1/verify?token=[redacted]&type=signup', 'token= in a URL in any field');
  t.equal(prod.lines[3].msg, 'a message with http://127.0.0.1:8000/auth/v1/verify?token=[redacted]&type=signup', 'and in the message');
  t.equal(prod.lines[4].to, 'https://app.test/#access_token=[redacted]&refresh_token=[redacted]&type=recovery', 'tokens in a fragment');
  t.notOk(JSON.stringify(prod.lines).includes('4b1d3f2c9e'), 'the token appears nowhere');

  const dev = capture(true);
  dev.log.info({ email: { to: 'ada@example.com', subject: 'Confirm', body: `Open ${link}` } }, 'email');
  t.equal(dev.lines[0].email.body, `Open ${link}`, 'in development mode the mail is logged whole: it is how a developer without SMTP signs in');
});
