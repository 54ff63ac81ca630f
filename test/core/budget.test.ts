/**
 * The connection budget's evictions (src/core/lane/budget.ts), on a real database: a pool
 * that waits for a unit of the budget takes one from another pool's idle connection, not
 * from its own (for the first half of its wait; after that its own idle one, rather than
 * failing the statement at the end of the wait). A pool busy enough to open one more
 * connection used to close its own idle one for it, and reconnect again and again: the
 * owner pool under the webhook worker's jobs opened about a hundred connections a second
 * beside the request lanes.
 */
import t, { type Test } from 'tap';
import { ConnectionBudget } from '../../src/core/lane/budget.ts';
import { budgetedPool, type Sql } from '../../src/core/lane/lanes.ts';
import { createTestDatabase } from '../helpers/database.ts';

/** The backend pids that served `bursts` bursts of `size` statements sent at once through `sql`, 10 ms apart. */
async function pidsServing(sql: Sql, bursts: number, size: number): Promise<Set<number>> {
  const pids = new Set<number>();
  for (let i = 0; i < bursts; i++) {
    const rows = await Promise.all(Array.from({ length: size }, () => sql<{ pid: number }[]>`select pg_catalog.pg_backend_pid() as pid`));
    for (const [r] of rows) pids.add(r.pid);
    await new Promise((r) => setTimeout(r, 10));
  }
  return pids;
}

/**
 * Two pools on a budget of 3: `other` holds two connections busy (`holdSeconds`) while `busy`,
 * with one connection, sends 30 bursts of four statements (it wants more connections than it
 * has, and its own connection is idle between the bursts).
 */
async function contend(t: Test, timeoutMs: number, holdSeconds = 1): Promise<{ pids: Set<number>; budget: ConnectionBudget }> {
  const db = await createTestDatabase(t);
  const budget = new ConnectionBudget(3, timeoutMs);
  const opts = { max: 3, onnotice: () => {} };
  const busy = budgetedPool(db.url, budget, 60_000, opts);
  const other = budgetedPool(db.url, budget, 60_000, opts);
  t.teardown(() => Promise.all([busy.end({ timeout: 1 }), other.end({ timeout: 1 })]));
  await busy`select 1`;
  const held = Promise.all([other`select pg_catalog.pg_sleep(${holdSeconds})`, other`select pg_catalog.pg_sleep(${holdSeconds})`]);
  await new Promise((r) => setTimeout(r, 100));
  t.equal(budget.inUse, 3, 'the budget is spent: 1 + 2 connections');
  const pids = await pidsServing(busy, 30, 4);
  await held;
  return { pids, budget };
}

t.test('a waiting pool takes another pool\'s idle connection, not its own', async (t) => {
  const { pids, budget } = await contend(t, 5000);
  t.ok(pids.size <= 3, `the busy pool's statements ran on ${pids.size} backends (at most its own and the other pool's two, reopened; 42 when it closed its own for each burst)`);
  t.equal(budget.waiting, 0, 'nothing waits');
  t.equal(budget.refusedAt, 0, 'no wait timed out');
});

t.test('after half its wait, a waiting pool may close its own idle connection: no statement fails', async (t) => {
  // A budget wait of 1.5 s, shorter than the other pool's 4 s statements: every statement still
  // succeeds (the half of the wait left for closing its own idle connection and opening one
  // again is long enough on a loaded machine; 300 ms was not).
  const { budget } = await contend(t, 1500, 4);
  t.equal(budget.refusedAt, 0, 'no wait timed out');
});
