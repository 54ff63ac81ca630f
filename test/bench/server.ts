/**
 * The service under test, in its own process (forked by test/bench/index.ts): the real
 * `startService` with the environment the driver gives (fixed JWT_SECRET, AUTH_RATE_LIMIT=0,
 * DATABASE_URL of the bench database). Answers the driver's IPC commands (stats, exit).
 */
import { loadConfig } from '../../src/core/config.ts';
import { createLogger } from '../../src/core/log.ts';
import { startService } from '../../src/service.ts';
import { bundledRuntime } from '../../src/functions/index.ts';
import { sendFailed, sendReady, serveCommands } from './ipc.ts';

export interface ServerReady {
  url: string;
  anonKey: string;
  serviceRoleKey: string;
  pid: number;
  /** The bundled edge runtime's address (FUNCTIONS_DIR given), else null. */
  edgeRuntimeUrl: string | null;
  /** Its per-start secret: the baseline calls the runtime as plinth does. */
  edgeRuntimeSecret: string | null;
}

try {
  const config = await loadConfig(process.env);
  const log = createLogger(config.logLevel);
  const service = await startService(config, log, {
    databaseUrl: process.env.DATABASE_URL!,
    worker: process.env.BENCH_WORKER !== 'false',
  });
  serveCommands({}, () => service.close(), service.app.server);
  // The process of the bench's function (the bundled runtime runs one per function).
  const runtime = bundledRuntime(service.app)?.member('bench_hello');
  const edgeRuntimeUrl = (await runtime?.ready(30_000)) ?? null;
  const edgeRuntimeSecret = runtime?.secret ?? null;
  sendReady({ url: service.url, anonKey: config.anonKey, serviceRoleKey: config.serviceRoleKey, pid: process.pid, edgeRuntimeUrl, edgeRuntimeSecret } satisfies ServerReady);
} catch (err) {
  sendFailed(err);
}
