/**
 * The baselines, in their own process (forked by test/bench/index.ts):
 *
 * - scenarios 1–4: a bare server, not a limit (plinth's request lanes beat it). A bare
 *   fastify route sends the same data query with `postgres` (`prepare: true`, same pool
 *   size, same superuser) in one round trip, with no role or claims setup, and sends the
 *   JSON text PostgreSQL built.
 * - scenario 7 (and the reference of token refresh): a bare fastify `/health` that sends
 *   the same `select 1` as the service's and the same body.
 * - scenario 6: the `argon2` command times the bare `argon2.verify` with the parameters of
 *   the hash the service stored, with as many calls in flight as the load has connections
 *   (argon2 runs in libuv's threadpool, and this process has the same UV_THREADPOOL_SIZE).
 */
import Fastify from 'fastify';
import postgres from 'postgres';
import argon2 from 'argon2';
import { sendFailed, sendReady, serveCommands } from './ipc.ts';

const JSON_TYPE = 'application/json; charset=utf-8';

interface Argon2Args {
  hash: string;
  password: string;
  concurrency: number;
  durationMs: number;
}

try {
  const sql = postgres(process.env.DATABASE_URL!, {
    max: Number(process.env.DB_POOL_SIZE ?? 10),
    prepare: true,
    onnotice: () => {},
    connection: { application_name: 'plinth-bench-baseline' },
  });
  const app = Fastify({ logger: false });

  app.get('/health', async (_req, reply) => {
    const [row] = await sql`select 1 as ok`;
    return reply.header('cache-control', 'no-store').send({ status: row ? 'ok' : 'degraded', pg_connected: true });
  });

  app.get<{ Querystring: { id: string } }>('/items', async (req, reply) => {
    const [row] = await sql`select coalesce(json_agg(t), '[]')::text as body from (select * from public.bench_items where id = ${req.query.id}) t`;
    return reply.type(JSON_TYPE).send(row.body);
  });

  app.get<{ Querystring: { lt: string; limit: string } }>('/books', async (req, reply) => {
    const [row] = await sql`
      select coalesce(json_agg(t), '[]')::text as body from (
        select b.id, b.title,
               (select row_to_json(a) from (select a.id, a.name from public.bench_authors a where a.id = b.author_id) a) as bench_authors
        from public.bench_books b
        where b.author_id < ${req.query.lt}
        order by b.id
        limit ${req.query.limit}
      ) t`;
    return reply.type(JSON_TYPE).send(row.body);
  });

  app.post<{ Body: { title: string; body: string } }>('/items', async (req, reply) => {
    const [row] = await sql`
      with i as (insert into public.bench_items (title, body) values (${req.body.title}, ${req.body.body}) returning *)
      select coalesce(json_agg(i), '[]')::text as body from i`;
    return reply.code(201).type(JSON_TYPE).send(row.body);
  });

  app.post<{ Body: { p_id: number } }>('/rpc/bench_author_name', async (req, reply) => {
    const [row] = await sql`select to_json(public.bench_author_name(${req.body.p_id}))::text as body`;
    return reply.type(JSON_TYPE).send(row.body);
  });

  await sql`select 1`;
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : 0;

  serveCommands(
    {
      /** Closed-loop `argon2.verify` for `durationMs` with `concurrency` calls in flight. */
      async argon2(a: Argon2Args) {
        const deadline = Date.now() + a.durationMs;
        let ops = 0;
        let failures = 0;
        const started = performance.now();
        const loop = async () => {
          while (Date.now() < deadline) {
            if (await argon2.verify(a.hash, a.password)) ops++;
            else failures++;
          }
        };
        await Promise.all(Array.from({ length: a.concurrency }, loop));
        return { ops, failures, seconds: (performance.now() - started) / 1000 };
      },
    },
    async () => {
      await app.close();
      await sql.end({ timeout: 2 });
    },
    app.server,
  );
  sendReady({ url: `http://127.0.0.1:${port}` });
} catch (err) {
  sendFailed(err);
}
