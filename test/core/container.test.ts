/**
 * The container files, read as `docker build` and `docker compose` would (no Docker engine
 * runs here): a multi-stage image that installs production dependencies at build time and
 * runs node directly as a non-root user with a health check, and a compose file that builds
 * it and requires JWT_SECRET.
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { startFlags } from '../../src/cli/start-flags.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Dockerfile instructions, continuation lines joined, comments dropped. */
function instructions(text: string): { op: string; args: string }[] {
  const joined = text.replace(/\\\n/g, ' ');
  return joined
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: op.toUpperCase(), args: rest.join(' ') };
    });
}

t.test('Dockerfile', async (t) => {
  const ins = instructions(readFileSync(`${ROOT}/Dockerfile`, 'utf8'));
  const froms = ins.filter((i) => i.op === 'FROM');
  t.ok(froms.length >= 2, 'multi-stage');
  for (const f of froms) t.match(f.args, /^node:24[\w.-]*/, 'on Node 24');
  const lastFrom = ins.lastIndexOf(froms.at(-1)!);
  const build = ins.slice(0, lastFrom);
  const runtime = ins.slice(lastFrom);
  t.ok(build.some((i) => i.op === 'RUN' && /npm ci\b.*--omit=dev/.test(i.args)), 'production dependencies installed at build time');
  t.notOk(runtime.some((i) => i.op === 'RUN' && /npm (ci|install)/.test(i.args)), 'nothing installed when the container starts');
  const user = runtime.filter((i) => i.op === 'USER').at(-1);
  t.ok(user && !/^(root|0)(:|$)/.test(user.args), `runs as a non-root user (${user?.args})`);
  const cmd = runtime.filter((i) => i.op === 'CMD').at(-1);
  const argv = JSON.parse(cmd!.args) as string[];
  t.equal(argv[0], 'node', 'CMD in exec form runs node itself: docker stop reaches the service');
  t.same(argv.slice(1, -1), startFlags(), "with npm start's flags");
  t.equal(argv.at(-1), 'src/main.ts');
  // The compile cache is filled at build time by a start with the CMD's flags (Node keeps one per flag set).
  const warm = runtime.find((i) => i.op === 'RUN' && /\bsrc\/main\.ts\b/.test(i.args));
  t.ok(warm, 'the compile cache is filled at build time');
  t.ok(warm!.args.includes(argv.slice(0, -1).join(' ') + ' src/main.ts'), `with the CMD's flags (${warm?.args})`);
  t.ok(runtime.some((i) => i.op === 'ENV' && /NODE_COMPILE_CACHE=/.test(i.args)), 'NODE_COMPILE_CACHE set for the run');
  t.ok(runtime.some((i) => i.op === 'ENV' && /MALLOC_ARENA_MAX=2/.test(i.args)), 'MALLOC_ARENA_MAX=2 set for the run (decision 0306)');
  t.ok(runtime.some((i) => i.op === 'ENV' && /MALLOC_MMAP_THRESHOLD_=131072/.test(i.args)), 'MALLOC_MMAP_THRESHOLD_=131072 set for the run (decision 0308)');
  const health = runtime.find((i) => i.op === 'HEALTHCHECK');
  t.match(health?.args, /\/ready/, 'a health check on readiness');
  t.ok(runtime.some((i) => i.op === 'COPY' && /--from=/.test(i.args)), 'dependencies copied from the build stage');
  // What test/core/image.test.ts proves by installing and running, checked here at a glance.
  const install = build.findIndex((i) => i.op === 'RUN' && /npm ci\b/.test(i.args));
  t.ok(build.slice(0, install).some((i) => i.op === 'COPY' && /^patches\s/.test(i.args)), 'patches/ is copied before npm ci (its postinstall applies them)');
  for (const dir of ['package.json', 'src', 'sql', 'dashboard']) {
    t.ok(runtime.some((i) => i.op === 'COPY' && !i.args.includes('--from=') && i.args.split(/\s+/)[0] === dir), `${dir} is in the run-time stage`);
  }
});

t.test('docker-compose.yml', async (t) => {
  const doc = parse(readFileSync(`${ROOT}/docker-compose.yml`, 'utf8')) as { services: Record<string, any> };
  const p = doc.services.plinth;
  t.ok(p, 'a plinth service');
  t.ok(p.build === '.' || p.build?.context === '.', 'built from this Dockerfile');
  t.notOk(String(p.command ?? '').includes('npm ci'), 'no install at container start');
  t.match(p.environment.JWT_SECRET, /^\$\{JWT_SECRET:\?/, 'JWT_SECRET required');
  t.match(p.environment.DATABASE_URL, /@db:5432\//, 'the database service');
  t.equal(p.depends_on?.db?.condition, 'service_healthy', 'starts once PostgreSQL is ready');
  t.equal(p.environment.HOST, '0.0.0.0');
  t.ok(doc.services.db.healthcheck, 'the database has a health check');
  t.match(readFileSync(`${ROOT}/README.md`, 'utf8'), /JWT_SECRET=.+ docker compose up/, "the README's compose line shows JWT_SECRET");
});
