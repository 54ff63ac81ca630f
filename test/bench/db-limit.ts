/**
 * `rest-get-by-key-db-limit`: the rate PostgreSQL itself reaches for the statements of a REST
 * GET by key, and plinth's rate beside it (rounds alternating, same run).
 *
 * The statements are the ones plinth sends, read back from `pg_stat_activity` after a GET
 * through the service: the lane's claims statement and the compiled query, one Sync for
 * both (pgbench's `\startpipeline … \endpipeline`, one implicit transaction, as on a lane),
 * prepared, as the `anon` role (the session role plinth's `plinth_anon` lane logs in with)
 * with the same claims text. pgbench (C, libpq) runs them with DB_POOL_SIZE connections:
 * the same connection budget the service has, and almost no client cost, so the rate is
 * the database's own limit on these cores.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { saturate, type Traffic } from './load.ts';
import type { CustomScenario, RunContext, RunResult } from './scenarios.ts';

const ITEM_IDS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17];

function getByKey(anonKey: string): Traffic {
  const headers = { apikey: anonKey, authorization: `Bearer ${anonKey}` };
  return { requests: ITEM_IDS.map((id) => ({ method: 'GET', path: `/rest/v1/bench_items?id=eq.${id}`, headers })) };
}

/** The compiled GET-by-key statement as the anon lane last ran it, and the claims plinth set. */
async function capture(ctx: RunContext): Promise<{ query: string; claims: string; params: number }> {
  const sql = postgres(ctx.dbUrl, { max: 1, onnotice: () => {} });
  try {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const r = await fetch(`${ctx.serviceUrl}/rest/v1/bench_items?id=eq.1`, { headers: { apikey: ctx.anonKey, authorization: `Bearer ${ctx.anonKey}` } });
      await r.text();
      if (r.status !== 200) throw new Error(`GET by key → ${r.status}`);
      const rows = await sql<{ query: string }[]>`
        select query from pg_stat_activity
         where datname = current_database() and usename = 'plinth_anon' and query like '%bench_items%' and query not like '%pg_stat_activity%'
         limit 1`;
      if (rows.length > 0) {
        const query = rows[0].query;
        const params = Math.max(0, ...[...query.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
        // The claims of the anon key, as the service verified them (the JWT's payload).
        const payload = ctx.anonKey.split('.')[1];
        const claims = Buffer.from(payload, 'base64url').toString('utf8');
        return { query, claims, params };
      }
      if (Date.now() > deadline) throw new Error('the anon lane’s statement was not seen in pg_stat_activity');
      await new Promise((res) => setTimeout(res, 50));
    }
  } finally {
    await sql.end();
  }
}

/** pgbench for `seconds`: transactions (pipelines) per second. */
function pgbench(ctx: RunContext, script: string, claims: string, clients: number, seconds: number): Promise<number> {
  const url = new URL(ctx.dbUrl);
  const args = ['-n', '-M', 'prepared', '-c', String(clients), '-j', '1', '-T', String(seconds), '-f', script, '-D', `claims=${claims}`];
  args.push('-h', url.hostname, '-p', url.port || '5432', '-U', decodeURIComponent(url.username), decodeURIComponent(url.pathname.slice(1)));
  return new Promise((resolve, reject) => {
    const p = spawn('pgbench', args, {
      env: { ...process.env, PGPASSWORD: decodeURIComponent(url.password), PGOPTIONS: '-c role=anon', PGAPPNAME: 'plinth-bench-pgbench' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => {
      const m = /tps = ([\d.]+)/.exec(out);
      const failed = /number of failed transactions: (\d+)/.exec(out);
      if (code !== 0 || !m) reject(new Error(`pgbench exited ${code}: ${out.slice(-400)}`));
      else if (failed && Number(failed[1]) > 0) reject(new Error(`pgbench: ${failed[1]} failed transactions`));
      else resolve(Number(m[1]));
    });
  });
}

async function run(ctx: RunContext): Promise<RunResult> {
  const { query, claims, params } = await capture(ctx);
  if (params > 1) throw new Error(`expected one parameter in the captured statement, saw ${params}: ${query.slice(0, 200)}`);
  const dir = mkdtempSync(join(tmpdir(), 'plinth-bench-pgbench-'));
  try {
    const script = join(dir, 'get-by-key.sql');
    // The lane's claims statement (claims, the role's statement timeout, the request id) and the work, one Sync.
    writeFileSync(
      script,
      [
        `\\set i random(0, ${ITEM_IDS.length - 1})`,
        // 1–9 and 11–17: every tenth row is unpublished.
        `\\set id :i + 1 + :i / 9`,
        '\\startpipeline',
        `select from pg_catalog.set_config('request.jwt.claims', :claims, true) _c, pg_catalog.set_config('statement_timeout', pg_catalog.current_setting('statement_timeout'), true) _t, pg_catalog.set_config('request.id', 'bench', true) _i;`,
        query.replace(/\$1\b/g, ':id').replace(/\s+/g, ' ').trim() + ';',
        '\\endpipeline',
        '',
      ].join('\n'),
    );
    const clients = Number(process.env.DB_POOL_SIZE ?? 10);
    const secs = ctx.quick ? 1 : 4;
    const traffic = getByKey(ctx.anonKey);
    const service = async () => (await saturate(ctx.serviceUrl, traffic, ctx.connections, secs)).rps;
    const database = () => pgbench(ctx, script, claims, clients, secs);
    if (!ctx.quick) {
      await database(); // warm-up of both
      await service();
    }
    const rounds = ctx.quick ? 2 : 4;
    let s = 0;
    let d = 0;
    for (let i = 0; i < rounds; i++) {
      if (i % 2 === 0) {
        d += await database();
        s += await service();
      } else {
        s += await service();
        d += await database();
      }
    }
    return {
      rps: Math.round(s / rounds),
      baseline_rps: Math.round(d / rounds),
      ratio: d > 0 ? s / d : null,
      baseline: `pgbench, ${clients} connections as anon, the claims statement and the captured query in one pipeline (one Sync), prepared`,
      note: `captured query: ${query.replace(/\s+/g, ' ').slice(0, 160)}…`,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const DB_LIMIT_SCENARIOS: readonly CustomScenario[] = [
  {
    name: 'rest-get-by-key-db-limit',
    what: 'GET one row by primary key through plinth, against PostgreSQL running the same statements itself',
    target: { kind: 'ratio', min: 0.7 },
    baselineLabel: 'pgbench: the same SQL, role and claims, DB_POOL_SIZE connections',
    run,
  },
];
