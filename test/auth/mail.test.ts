/**
 * Emails (contract §4): bodies with exactly one `token=` link per kind, sealing, SMTP over
 * the three transport shapes (plain with opportunistic STARTTLS and AUTH, implicit TLS),
 * the change notice (no link), and the log instead of SMTP when SMTP_URL is unset: the
 * whole email only in development mode, elsewhere only that it was not sent.
 */
import t from 'tap';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { SMTPServer } from 'smtp-server';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { composeAccountChanged, composeEmail, sendEmailTask } from '../../src/auth/mail.ts';
import { seal, unseal, newOpaqueToken, hashToken } from '../../src/auth/tokens.ts';
import type { RuntimeConfig } from '../../src/core/config.ts';
import { TEST_JWT_SECRET } from '../helpers/app.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { PASSWORD, linksOf, parseMail, startAuthApp, startSmtp, tokenOfLink, uniqueEmail, sleep } from './helpers.ts';

const SECRET = 'mail-test-secret-mail-test-secret-0123456789';
const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

t.test('bodies: exactly one link with token= per kind', async (t) => {
  const config = { apiExternalUrl: 'https://api.example.org', siteUrl: 'https://app.example.org' };
  const expected = {
    verification: 'https://api.example.org/auth/v1/verify?token=',
    magic_link: 'https://api.example.org/auth/v1/magiclink/verify?token=',
    recovery: 'https://app.example.org/reset-password?token=',
  } as const;
  for (const kind of ['verification', 'magic_link', 'recovery'] as const) {
    const m = composeEmail(config, kind, 'tok_EN-123');
    const links = linksOf(m.text);
    t.same(links, [expected[kind] + 'tok_EN-123'], kind);
    t.equal(m.link, links[0]);
    t.equal((m.text.match(/token=/g) ?? []).length, 1, `${kind}: one token=`);
    t.ok(m.subject.length > 0);
  }
});

t.test('sealing: AES-256-GCM under a key derived from the secret', async (t) => {
  const { token, hash } = newOpaqueToken();
  t.same(hash, hashToken(token));
  t.equal(Buffer.from(token, 'base64url').length, 32, '256 bits of entropy');
  const sealed = seal(SECRET, token);
  t.notMatch(sealed, token);
  t.not(seal(SECRET, token), sealed, 'a fresh IV each time');
  t.equal(unseal(SECRET, sealed), token);
  t.throws(() => unseal(SECRET.replace('0', '1'), sealed), 'another secret cannot open it');
  const tampered = Buffer.from(sealed, 'base64url');
  tampered[14] ^= 1;
  t.throws(() => unseal(SECRET, tampered.toString('base64url')), 'tampering is detected');
});

function captureLogger(level = 'debug') {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { log: pino({ level }, stream), lines };
}

t.test('SMTP_URL unset, development mode: the email is written to the log, not sent', async (t) => {
  const { log, lines } = captureLogger();
  const config = { secret: SECRET, devMode: true, smtpUrl: null, mailFrom: 'noreply@localhost', apiExternalUrl: 'http://localhost:8000', siteUrl: 'http://localhost:3000' } as unknown as RuntimeConfig;
  const task = sendEmailTask(config, log);
  const helpers = { job: { id: '1' } } as unknown as Parameters<typeof task>[1];
  await task({ kind: 'magic_link', to: 'dev@example.com', sealed_token: seal(SECRET, 'the-token') }, helpers);
  await sleep(50);
  const line = lines.find((l) => l.msg === 'email (SMTP_URL unset, not sent)') as { email: { to: string; body: string } } | undefined;
  t.ok(line, 'logged');
  t.equal(line!.email.to, 'dev@example.com');
  t.same(linksOf(line!.email.body), ['http://localhost:8000/auth/v1/magiclink/verify?token=the-token']);

  await task({ kind: 'recovery', to: 'x@example.com', sealed_token: seal('another-secret-another-secret-another-secret', 'x') }, helpers);
  await sleep(50);
  t.ok(lines.some((l) => l.msg === 'auth__send_email: token cannot be unsealed; dropped'), 'a token sealed with another secret is dropped, not retried');
});

t.test('SMTP_URL unset with a JWT_SECRET: the log says what was not sent, never the body or the link', async (t) => {
  const { log, lines } = captureLogger();
  const config = { secret: SECRET, devMode: false, smtpUrl: null, mailFrom: 'noreply@localhost', apiExternalUrl: 'http://localhost:8000', siteUrl: 'http://localhost:3000' } as unknown as RuntimeConfig;
  const task = sendEmailTask(config, log);
  const helpers = { job: { id: '1' } } as unknown as Parameters<typeof task>[1];
  for (const kind of ['magic_link', 'recovery', 'verification'] as const) {
    await task({ kind, to: 'prod@example.com', sealed_token: seal(SECRET, 'the-live-token') }, helpers);
  }
  await sleep(50);
  const text = lines.map((l) => JSON.stringify(l)).join('\n');
  t.notMatch(text, /the-live-token|token=|https?:\/\//, 'no token and no link in the log');
  t.same(
    lines.filter((l) => l.msg === 'email not sent: SMTP_URL is unset').map((l) => l.email),
    [{ kind: 'magic_link', to: 'prod@example.com' }, { kind: 'recovery', to: 'prod@example.com' }, { kind: 'verification', to: 'prod@example.com' }],
    'one line per email: its kind and recipient',
  );
});

t.test('the change notice: plain text, no link, no token', async (t) => {
  const both = composeAccountChanged({ email_changed: true, password_changed: true, new_email: 'new@example.com' });
  t.match(both.text, /changed to new@example\.com/);
  t.match(both.text, /password of your account was changed/);
  t.same(linksOf(both.text), [], 'no link');
  t.notMatch(both.text, /token/);
  const pw = composeAccountChanged({ email_changed: false, password_changed: true, new_email: null });
  t.equal(pw.subject, 'The password of your account was changed');
  t.notMatch(pw.text, /email address/);
});

t.test('a job without a recipient (unknown or limited address) sends and logs nothing', async (t) => {
  const { log, lines } = captureLogger();
  const config = { secret: SECRET, devMode: true, smtpUrl: null, mailFrom: 'noreply@localhost', apiExternalUrl: 'http://localhost:8000', siteUrl: 'http://localhost:3000' } as unknown as RuntimeConfig;
  const task = sendEmailTask(config, log);
  const helpers = { job: { id: '1' } } as unknown as Parameters<typeof task>[1];
  await task({ kind: 'recovery', to: null, sealed_token: null }, helpers);
  await task({ kind: 'magic_link', to: null }, helpers);
  await sleep(50);
  t.same(lines, [], 'the job ends silently');
});

t.test('SMTP_URL unset end to end: the job runs and completes', async (t) => {
  const app = await startAuthApp(t, { env: { REQUIRE_EMAIL_VERIFICATION: 'true' } });
  t.equal(app.config.smtpUrl, null);
  const email = uniqueEmail('log');
  t.equal((await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } })).status, 200);
  let left = 1;
  for (let i = 0; i < 40 && left > 0; i++) {
    await sleep(250);
    [{ n: left }] = await app.db.sql`select count(*)::int as n from graphile_worker._private_jobs j
      join graphile_worker._private_tasks k on k.id = j.task_id where k.identifier = 'auth__send_email'`;
  }
  t.equal(left, 0, 'the job was taken and completed without SMTP');
});

/** The auth__send_email jobs still pending (done jobs are deleted). */
async function pendingMailJobs(sql: TestDatabase['sql']): Promise<number> {
  const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from graphile_worker._private_jobs j
    join graphile_worker._private_tasks k on k.id = j.task_id where k.identifier = 'auth__send_email'`;
  return n;
}

async function until(cond: () => Promise<boolean> | boolean, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`not met in time: ${what}`);
    await sleep(50);
  }
}

t.test('a real plinth with JWT_SECRET and without SMTP_URL: no link reaches its log', async (t) => {
  const db = await createTestDatabase(t);
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-mail-'));
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: db.url,
      MIGRATE_ON_START: 'false',
      JWT_SECRET: TEST_JWT_SECRET,
      HOST: '127.0.0.1',
      PORT: '0',
      DATA_DIR: dataDir,
      DB_POOL_SIZE: '2',
      LOG_LEVEL: 'info',
      AUTH_RATE_LIMIT: '0',
    },
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });
  // A cold process on a loaded 2-core machine: a generous deadline, never a fixed sleep.
  await until(() => /plinth listening on (\S+)/.test(out), `start: ${out}`, 120_000);
  const url = /plinth listening on (\S+)/.exec(out)![1];
  const post = (path: string, body: unknown, token?: string) =>
    fetch(url + path, {
      method: path === '/auth/v1/user' ? 'PATCH' : 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });

  const email = uniqueEmail('prod-log');
  const signup = await post('/auth/v1/signup', { email, password: PASSWORD });
  t.equal(signup.status, 201);
  const { access_token } = (await signup.json()) as { access_token: string };
  t.equal((await post('/auth/v1/magiclink', { email })).status, 200);
  t.equal((await post('/auth/v1/recover', { email })).status, 200);
  t.equal((await post('/auth/v1/user', { password: 'another password' }, access_token)).status, 200);
  const emailLines = () => out.split('\n').filter((l) => l.startsWith('{') && l.includes('"email":'));
  const notSent = () => emailLines().filter((l) => l.includes('email not sent: SMTP_URL is unset'));
  await until(async () => emailLines().length >= 3 && (await pendingMailJobs(db.sql)) === 0, 'three emails handled', 60_000);

  const kinds = notSent().map((l) => (JSON.parse(l) as { email: { kind: string; to: string } }).email);
  t.same(kinds.map((k) => k.kind).sort(), ['account_changed', 'magic_link', 'recovery'], 'each email is logged as not sent');
  t.ok(kinds.every((k) => k.to === email), 'with its recipient');
  t.notMatch(out, /token=|magiclink\/verify|reset-password/, 'and no link, token or body anywhere in the log');
  // Link tokens: a magic-link mail's code is a row beside its link.
  const [{ n }] = await db.sql<{ n: number }[]>`select count(*)::int as n from auth_private.one_time_tokens
    where not is_code and user_id = ${(JSON.parse(Buffer.from(access_token.split('.')[1], 'base64url').toString()) as { sub: string }).sub}`;
  t.equal(n, 2, 'the two tokens were issued all the same');
});

t.test('a real plinth in development mode (no JWT_SECRET): the whole email is logged', async (t) => {
  const { log, lines } = captureLogger('info');
  const app = await startAuthApp(t, { env: { JWT_SECRET: undefined }, log });
  t.equal(app.config.devMode, true);
  const email = uniqueEmail('dev-log');
  await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
  t.equal((await app.call('POST', '/auth/v1/magiclink', { body: { email } })).status, 200);
  await until(() => lines.some((l) => l.msg === 'email (SMTP_URL unset, not sent)'), 'the email in the log');
  const line = lines.find((l) => l.msg === 'email (SMTP_URL unset, not sent)') as { email: { to: string; body: string } };
  t.equal(line.email.to, email);
  const [link] = linksOf(line.email.body);
  t.match(link, /\/auth\/v1\/magiclink\/verify\?token=/, 'with its link, for the developer to open');
  const u = new URL(link);
  t.equal((await app.call('GET', u.pathname + u.search)).status, 302, 'and the link works');
});

t.test('smtp:// with credentials: STARTTLS when offered, then AUTH', async (t) => {
  const received: string[] = [];
  const auths: string[] = [];
  const server = new SMTPServer({
    logger: false,
    onAuth(auth, session, cb) {
      auths.push(`${auth.username}:${auth.password}:${session.secure}`);
      if (auth.username === 'mailer' && auth.password === 's3cret') return cb(null, { user: 'mailer' });
      return cb(new Error('bad credentials'));
    },
    onData(stream, _session, cb) {
      let raw = '';
      stream.on('data', (c: Buffer) => (raw += c.toString('utf8')));
      stream.on('end', () => {
        received.push(raw);
        cb();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.server.address() as AddressInfo).port;
  const app = await startAuthApp(t, { env: { SMTP_URL: `smtp://mailer:s3cret@127.0.0.1:${port}`, REQUIRE_EMAIL_VERIFICATION: 'true' } });
  const email = uniqueEmail('auth');
  await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
  for (let i = 0; i < 40 && received.length === 0; i++) await sleep(250);
  t.equal(received.length, 1, 'delivered');
  t.same(auths, ['mailer:s3cret:true'], 'authenticated after STARTTLS');
  const mail = parseMail(received[0], { from: '', to: [email] });
  const token = tokenOfLink(linksOf(mail.text)[0]);
  t.equal((await app.call('GET', `/auth/v1/verify?token=${token}`)).status, 200);
});

t.test('smtps:// is TLS from the first byte; URL query options reach nodemailer', async (t) => {
  const received: string[] = [];
  const server = new SMTPServer({
    secure: true,
    authOptional: true,
    logger: false,
    onData(stream, session, cb) {
      let raw = '';
      stream.on('data', (c: Buffer) => (raw += c.toString('utf8')));
      stream.on('end', () => {
        received.push(`${session.secure}`);
        cb();
      });
    },
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.server.address() as AddressInfo).port;
  // The test server's certificate is self-signed: smtps:// verifies certificates unless told otherwise.
  const app = await startAuthApp(t, { env: { SMTP_URL: `smtps://127.0.0.1:${port}?tls.rejectUnauthorized=false` } });
  await app.call('POST', '/auth/v1/signup', { body: { email: 'tls@example.com', password: PASSWORD } });
  await app.call('POST', '/auth/v1/magiclink', { body: { email: 'tls@example.com' } });
  for (let i = 0; i < 40 && received.length === 0; i++) await sleep(250);
  t.same(received, ['true'], 'delivered over TLS');
});

t.test('a failed delivery is retried by the worker', async (t) => {
  // A port nothing listens on at first: the first attempt fails; the receiver opens there later.
  const port = await new Promise<number>((resolve) => {
    const s = createNetServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
  const app = await startAuthApp(t, { env: { SMTP_URL: `smtp://127.0.0.1:${port}` } });
  const email = uniqueEmail('retry');
  await app.call('POST', '/auth/v1/signup', { body: { email, password: PASSWORD } });
  await app.call('POST', '/auth/v1/magiclink', { body: { email } });
  const failed = async () =>
    (await app.db.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker._private_jobs j
      join graphile_worker._private_tasks k on k.id = j.task_id
      where k.identifier = 'auth__send_email' and j.attempts >= 1 and j.last_error is not null`)[0].n;
  const deadline = Date.now() + 30_000;
  while ((await failed()) === 0 && Date.now() < deadline) await sleep(100);
  t.equal(await failed(), 1, 'the failed attempt is recorded and the job kept for a retry');
  const smtp = await startSmtp(t, port);
  const mail = await smtp.next(email, 60_000);
  t.match(mail.text, /\/auth\/v1\/magiclink\/verify\?token=/, 'the retry delivers the magic link once the mail server is back');
  const gone = Date.now() + 30_000;
  while ((await pendingMailJobs(app.db.sql)) > 0 && Date.now() < gone) await sleep(100);
  t.equal(await pendingMailJobs(app.db.sql), 0, 'and the job is done');
});
