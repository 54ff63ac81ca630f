/**
 * MAIL_RATE_LIMIT_PER_HOUR: recovery and magic-link mails per address in any hour, with a
 * real SMTP receiver. Over the limit nothing is delivered and the answer is the same, byte
 * for byte; the limit is held in PostgreSQL, so it holds across instances; 0 disables it.
 */
import t from 'tap';
import { parseConfig } from '../../src/core/config.ts';
import type { TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { signUp, sleep, startAuthApp, startSmtp, uniqueEmail, type SmtpReceiver } from './helpers.ts';

/** Until no auth__send_email job is left: every request's mail has been sent, or not. */
async function mailsSettled(app: TestApp): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const [{ n }] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker._private_jobs j
      join graphile_worker._private_tasks k on k.id = j.task_id where k.identifier = 'auth__send_email'`;
    if (n === 0) return;
    if (Date.now() > deadline) throw new Error(`${n} email jobs still pending`);
    await sleep(50);
  }
}

const delivered = (smtp: SmtpReceiver, to: string) => smtp.mails.filter((m) => m.to.includes(to)).length;

t.test('configuration: default 5, a whole number, 0 disables', async (t) => {
  t.equal(parseConfig({}).mailRateLimitPerHour, 5);
  t.equal(parseConfig({ MAIL_RATE_LIMIT_PER_HOUR: '0' }).mailRateLimitPerHour, 0);
  for (const bad of ['-1', 'five', '1.5', '100000']) {
    t.throws(() => parseConfig({ MAIL_RATE_LIMIT_PER_HOUR: bad }), { message: /^invalid configuration: MAIL_RATE_LIMIT_PER_HOUR / }, bad);
  }
});

t.test('the default limit: the sixth mail of the hour to one address is not delivered; the answers do not tell', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, { env: { SMTP_URL: smtp.url } });
  t.equal(app.config.mailRateLimitPerHour, 5);
  const { email } = await signUp(app);
  const fresh = (await signUp(app)).email;
  const answers: Record<string, string[]> = { '/auth/v1/recover': [], '/auth/v1/magiclink': [] };
  for (let i = 0; i < 6; i++) {
    const path = i % 2 === 0 ? '/auth/v1/recover' : '/auth/v1/magiclink';
    const r = await app.call('POST', path, { body: { email: i % 3 === 0 ? email.toUpperCase() : email } });
    t.equal(r.status, 200, `request ${i + 1}`);
    answers[path].push(r.text);
  }
  for (const path of Object.keys(answers)) {
    const unknown = await app.call('POST', path, { body: { email: uniqueEmail('nobody') } });
    const other = await app.call('POST', path, { body: { email: fresh } });
    t.same(new Set([...answers[path], unknown.text, other.text]).size, 1, `${path}: one answer, limited or not, known or not`);
  }
  await mailsSettled(app);
  t.equal(delivered(smtp, email), 5, 'five mails reached the address, the sixth did not');
  t.equal(delivered(smtp, fresh), 2, 'another address has its own budget');
  // Link tokens: a magic-link mail's code is a row beside its link.
  const [{ n }] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from auth_private.one_time_tokens t
    join auth.users u on u.id = t.user_id where u.email = ${email} and not t.is_code`;
  t.equal(n, 5, 'no token was issued for the mail that was not sent');

  // An hour later (the window slides) the address gets mail again.
  await app.db.sql`update auth_private.mail_limits set hits = array(select h - interval '61 minutes' from unnest(hits) h)`;
  t.equal((await app.call('POST', '/auth/v1/magiclink', { body: { email } })).status, 200);
  await mailsSettled(app);
  t.equal(delivered(smtp, email), 6, 'after the hour, the next one is delivered');
});

t.test('one limit for two instances sharing the database', async (t) => {
  const smtp = await startSmtp(t);
  const db = await createTestDatabase(t);
  const env = { SMTP_URL: smtp.url, MAIL_RATE_LIMIT_PER_HOUR: '3' };
  const a = await startAuthApp(t, { db, env });
  const b = await startAuthApp(t, { db, env });
  const { email } = await signUp(a);
  const results = await Promise.all(
    Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? a : b).call('POST', '/auth/v1/magiclink', { body: { email } })),
  );
  t.ok(results.every((r) => r.status === 200), 'every request answers 200');
  await mailsSettled(a);
  t.equal(delivered(smtp, email), 3, 'three mails in all');
});

t.test('MAIL_RATE_LIMIT_PER_HOUR=0 disables the limit', async (t) => {
  const smtp = await startSmtp(t);
  const app = await startAuthApp(t, { env: { SMTP_URL: smtp.url, MAIL_RATE_LIMIT_PER_HOUR: '0' } });
  const { email } = await signUp(app);
  for (let i = 0; i < 7; i++) t.equal((await app.call('POST', '/auth/v1/recover', { body: { email } })).status, 200);
  await mailsSettled(app);
  t.equal(delivered(smtp, email), 7, 'every mail is delivered');
  const [{ n }] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from auth_private.mail_limits`;
  t.equal(n, 0, 'nothing is counted');
});
