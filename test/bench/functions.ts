/**
 * The edge functions scenarios (issue 14):
 *
 * - `functions-deno`: POST /functions/v1/bench_hello through plinth to a trivial function on
 *   the bundled Deno runtime, against the same POST straight to that runtime (the limit).
 *   Goal ≥ 0.7.
 * - `functions-db`: a database function `public.bench_fn_author(payload jsonb)` through
 *   /functions/v1/ (plv8 runtime) against the same function through /rest/v1/rpc/, both on
 *   the service. Goal ≥ 0.9.
 *
 * The driver gives the service FUNCTIONS_DIR = `functionsDir(dataDir)` (written here) and
 * reads the runtime's address from the service's ready message.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Env, Scenario } from './scenarios.ts';

export const FUNCTIONS_FIXTURE_SQL = `
create function public.bench_fn_author(payload jsonb) returns text
  language sql stable
as $$ select name from public.bench_authors where id = (payload ->> 'id')::bigint $$;
grant execute on function public.bench_fn_author(jsonb) to anon, authenticated;
insert into edge.functions (name, runtime, verify_jwt) values ('bench_fn_author', 'plv8', true), ('bench_hello', 'deno', true);
`;

/** Writes the trivial function under `dataDir/functions`; returns that folder. */
export function functionsDir(dataDir: string): string {
  const dir = join(dataDir, 'functions');
  mkdirSync(join(dir, 'bench_hello'), { recursive: true });
  writeFileSync(
    join(dir, 'bench_hello', 'index.ts'),
    `export default async (req: Request): Promise<Response> => {
  await req.arrayBuffer();
  return new Response('{"hello":"world"}', { headers: { 'content-type': 'application/json' } });
};
`,
  );
  return dir;
}

const AUTHOR_IDS = [1, 7, 19, 42, 77, 101, 150, 199];
const HELLO_BODY = JSON.stringify({ name: 'bench' });
const headers = (env: Env) => ({ 'content-type': 'application/json', apikey: env.anonKey, authorization: `Bearer ${env.anonKey}` });

export const FUNCTION_SCENARIOS: readonly Scenario[] = [
  {
    name: 'functions-deno',
    what: 'POST /functions/v1 to a trivial function on the bundled Deno runtime, anon key',
    target: { kind: 'ratio', min: 0.7 },
    baselineLabel: 'the same POST straight to the bundled runtime',
    baselineTarget: 'edge-runtime',
    service: (env) => ({ requests: [{ method: 'POST', path: '/functions/v1/bench_hello', headers: headers(env), body: HELLO_BODY }] }),
    // As plinth calls the runtime: the function it names and the runtime's per-start secret.
    baseline: (env) => ({
      requests: [
        { method: 'POST', path: '/bench_hello', headers: { ...headers(env), 'x-plinth-function': 'bench_hello', 'x-plinth-runtime-secret': env.edgeRuntimeSecret ?? '' }, body: HELLO_BODY },
      ],
    }),
  },
  {
    name: 'functions-db',
    what: 'POST /functions/v1 of a database function (plv8 runtime), anon key',
    target: { kind: 'ratio', min: 0.9 },
    baselineLabel: 'the same function through /rest/v1/rpc/',
    baselineTarget: 'service',
    service: (env) => ({
      requests: AUTHOR_IDS.map((id) => ({ method: 'POST', path: '/functions/v1/bench_fn_author', headers: headers(env), body: JSON.stringify({ id }) })),
    }),
    baseline: (env) => ({
      requests: AUTHOR_IDS.map((id) => ({
        method: 'POST',
        path: '/rest/v1/rpc/bench_fn_author',
        headers: headers(env),
        body: JSON.stringify({ payload: { id } }),
      })),
    }),
  },
];
