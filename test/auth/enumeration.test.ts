/**
 * No enumeration (issue item 8): recover and magiclink answer byte for byte the same for
 * known and unknown addresses and do the same work (one email job either way; for an
 * unknown address the job has no recipient), and password sign-in with an unknown address
 * does the same argon2 work as with a known one (compared by the CPU time this process
 * spends per call — the service runs in it, argon2 in its thread pool — not by wall-clock
 * time, which on a loaded machine measures the scheduler).
 */
import t from 'tap';
import { PASSWORD, signUp, startAuthApp, uniqueEmail } from './helpers.ts';

/** CPU milliseconds (user + system, every thread of this process) one call costs. */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = process.cpuUsage();
  await fn();
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

/** The median sample: CPU time does not grow with the machine's load, but a stray collection may land in one call. */
function fastest(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

t.test('no enumeration', async (t) => {
  const app = await startAuthApp(t, { worker: false });
  const { email } = await signUp(app);
  const unknown = uniqueEmail('nobody');

  t.test('recover and magiclink: identical answers', async (t) => {
    for (const path of ['/auth/v1/recover', '/auth/v1/magiclink']) {
      const a = await app.call('POST', path, { body: { email } });
      const b = await app.call('POST', path, { body: { email: unknown } });
      t.equal(a.status, 200, path);
      t.equal(b.status, a.status, path);
      t.equal(b.text, a.text, `${path}: same bytes`);
      t.equal(b.headers.get('content-type'), a.headers.get('content-type'));
    }
  });

  t.test('recover and magiclink: the same work, one email job, for known and unknown addresses', async (t) => {
    const jobs = async () => {
      const rows = await app.db.sql<{ to: string | null }[]>`select j.payload ->> 'to' as to from graphile_worker._private_jobs j
        join graphile_worker._private_tasks k on k.id = j.task_id where k.identifier = 'auth__send_email' order by j.id`;
      return rows.map((r) => r.to);
    };
    for (const path of ['/auth/v1/recover', '/auth/v1/magiclink']) {
      const before = await jobs();
      t.equal((await app.call('POST', path, { body: { email } })).status, 200);
      const known = await jobs();
      t.same(known.slice(before.length), [email], `${path}: a registered address gets its email job`);
      t.equal((await app.call('POST', path, { body: { email: unknown } })).status, 200);
      const after = await jobs();
      t.same(after.slice(known.length), [null], `${path}: an unknown address gets one job too, without a recipient`);
    }
  });

  t.test('sign-in: unknown address costs a hash verification like a wrong password', async (t) => {
    const wrong = () => app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email, password: 'not the password' } });
    const ghost = () => app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email: unknown, password: PASSWORD } });
    const cheap = () => app.call('POST', '/auth/v1/token', { body: { grant_type: 'refresh_token', refresh_token: 'nope' } });
    // Warm up (the dummy hash, the prepared statements).
    for (let i = 0; i < 2; i++) await Promise.all([wrong(), ghost(), cheap()]);
    const known: number[] = [];
    const unknownTimes: number[] = [];
    const baseline: number[] = [];
    for (let i = 0; i < 13; i++) {
      known.push(await timed(wrong));
      unknownTimes.push(await timed(ghost));
      baseline.push(await timed(cheap));
    }
    const [k, u, b] = [fastest(known), fastest(unknownTimes), fastest(baseline)];
    t.comment(`median CPU ms: known ${k.toFixed(1)}, unknown ${u.toFixed(1)}, no hashing ${b.toFixed(1)}`);
    t.ok(k > b * 3, 'a wrong password costs a real argon2 verification');
    t.ok(u > b * 3, 'so does an unknown address');
    // Same argon2 parameters, so the same work: a cheaper dummy hash would be several times faster.
    t.ok(u / k > 0.5 && u / k < 2, `comparable times (ratio ${(u / k).toFixed(2)})`);
    const [r1, r2] = [await wrong(), await ghost()];
    t.same(r1.body, { error: 'invalid email or password' });
    t.same(r2.body, r1.body, 'same message');
  });
});
