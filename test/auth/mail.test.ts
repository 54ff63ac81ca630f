/**
 * Emails (contract §4): bodies with exactly one `token=` link per kind, sealing, SMTP over
 * the three transport shapes (plain with opportunistic STARTTLS and AUTH, implicit TLS),
 * and the log instead of SMTP when SMTP_URL is unset.
 */
import t from 'tap';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { SMTPServer } from 'smtp-server';
import type { AddressInfo } from 'node:net';
import { composeEmail, sendEmailTask } from '../../src/auth/mail.ts';
import { seal, unseal, newOpaqueToken, hashToken } from '../../src/auth/tokens.ts';
import type { RuntimeConfig } from '../../src/core/config.ts';
import { PASSWORD, linksOf, parseMail, startAuthApp, tokenOfLink, uniqueEmail, sleep } from './helpers.ts';

const SECRET = 'mail-test-secret-mail-test-secret-0123456789';

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

function captureLogger() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { log: pino({ level: 'debug' }, stream), lines };
}

t.test('SMTP_URL unset: the email is written to the log, not sent', async (t) => {
  const { log, lines } = captureLogger();
  const config = { secret: SECRET, smtpUrl: null, mailFrom: 'noreply@localhost', apiExternalUrl: 'http://localhost:8000', siteUrl: 'http://localhost:3000' } as unknown as RuntimeConfig;
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
  // Nothing listens on this port at first: the first attempt fails.
  const app = await startAuthApp(t, { env: { SMTP_URL: `smtp://127.0.0.1:1` } });
  await app.call('POST', '/auth/v1/signup', { body: { email: 'retry@example.com', password: PASSWORD } });
  await app.call('POST', '/auth/v1/magiclink', { body: { email: 'retry@example.com' } });
  let attempts = 0;
  for (let i = 0; i < 40 && attempts === 0; i++) {
    await sleep(250);
    [{ attempts }] = await app.db.sql`select coalesce(max(attempts), 0)::int as attempts from graphile_worker._private_jobs where last_error is not null`;
  }
  t.ok(attempts >= 1, 'the failed attempt is recorded and the job kept for a retry');
});
