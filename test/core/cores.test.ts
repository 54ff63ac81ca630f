/**
 * WORKERS (src/core/cores.ts): `auto` as the cgroup's CPU quota lowers it, the limit the
 * connection budget puts on it, and the split of DB_POOL_SIZE between the processes.
 */
import t from 'tap';
import { cgroupCpus, maxWorkersFor, parseWorkers, requestShare } from '../../src/core/cores.ts';
import { parseConfig } from '../../src/core/config.ts';

t.test('the cgroup v2 quota in whole CPUs', async (t) => {
  t.equal(cgroupCpus('max 100000\n'), null, 'no quota');
  t.equal(cgroupCpus('200000 100000\n'), 2);
  t.equal(cgroupCpus('150000 100000'), 2, 'rounded up');
  t.equal(cgroupCpus('50000 100000'), 1, 'at least one');
  t.equal(cgroupCpus(null), null, 'no file');
  t.equal(cgroupCpus('garbage'), null);
});

t.test('WORKERS', async (t) => {
  t.equal(parseWorkers(undefined, 10), 1, 'default 1');
  t.equal(parseWorkers('3', 10), 3);
  t.equal(parseWorkers('auto', 10, () => 4), 4, 'auto: the cores');
  t.equal(parseWorkers('auto', 10, () => 64), 10, 'auto: capped by DB_POOL_SIZE (each process: a request connection)');
  t.equal(maxWorkersFor(1), 1);
  t.equal(parseWorkers('10', 10), 10, 'as many as DB_POOL_SIZE');
  t.match(parseWorkers('11', 10), /more than DB_POOL_SIZE=10 allows \(at most 10/, 'too many for the budget');
  for (const bad of ['0', '-1', 'two', '1.5', '257']) t.match(parseWorkers(bad, 1000), /must be auto or a whole number/, bad);
  t.throws(() => parseConfig({ WORKERS: '0' }), /invalid configuration: WORKERS must be auto or a whole number from 1 to 256/);
  t.equal(parseConfig({ WORKERS: '2' }).workers, 2);
});

t.test('the split of DB_POOL_SIZE: the processes share it (the one listener is the primary\'s)', async (t) => {
  for (const [pool, n] of [
    [10, 1],
    [10, 2],
    [10, 3],
    [10, 5],
    [4, 2],
    [3, 2],
    [3, 3],
    [1000, 7],
  ]) {
    const shares = Array.from({ length: n }, (_, i) => requestShare(pool, n, i + 1));
    const total = shares.reduce((a, b) => a + b, 0);
    t.equal(total, pool, `${pool} over ${n}: ${shares.join('+')} request connections`);
    t.ok(Math.max(...shares) - Math.min(...shares) <= 1 && Math.min(...shares) >= 1, 'even, each at least one');
  }
  t.same([1, 2].map((i) => requestShare(10, 2, i)), [5, 5], 'an even split');
  t.same([1, 2, 3].map((i) => requestShare(10, 3, i)), [4, 3, 3], 'the first process the one more');
});
