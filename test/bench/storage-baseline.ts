/**
 * The storage scenarios' limit, in its own process (forked by test/bench/storage.ts): a bare
 * fastify route that streams a request body to a file, and one that streams a file back.
 * No credentials, no database, no byte counting: only what any upload or download must do.
 */
import Fastify from 'fastify';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { sendFailed, sendReady, serveCommands } from './ipc.ts';

try {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-bench-files-'));
  const app = Fastify({ logger: false });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
  let n = 0;
  app.post('/upload/:name', async (req, reply) => {
    const file = join(dir, `${(req.params as { name: string }).name}-${n++}`);
    await pipeline(req.raw, createWriteStream(file, { highWaterMark: 1024 * 1024 }));
    return reply.send({ ok: true });
  });
  app.get('/download/:name', async (req, reply) => {
    const file = join(dir, (req.params as { name: string }).name);
    return reply.type('application/octet-stream').send(createReadStream(file, { highWaterMark: 1024 * 1024 }));
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address() as { port: number };
  serveCommands(
    {
      /** Write the file the download route serves. */
      seed: async (args: { name: string; bytes: number }) => {
        const chunk = Buffer.alloc(1024 * 1024, 7);
        const out = createWriteStream(join(dir, args.name));
        for (let left = args.bytes; left > 0; left -= chunk.length) {
          if (!out.write(left >= chunk.length ? chunk : chunk.subarray(0, left))) await new Promise<void>((r) => out.once('drain', () => r()));
        }
        await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
        return null;
      },
    },
    async () => {
      await app.close();
      rmSync(dir, { recursive: true, force: true });
    },
    app.server,
  );
  sendReady({ url: `http://127.0.0.1:${addr.port}` });
} catch (err) {
  sendFailed(err);
}
