/**
 * Boot: config → (embedded PostgreSQL) → migrations → HTTP + worker. Owns shutdown
 * (docs/operations.md): on SIGTERM/SIGINT `/ready` answers 503 at once, the listener goes on
 * accepting for SHUTDOWN_GRACE_MS, then stops accepting and drains; then the worker stops
 * (jobs in flight are handed back), the pools end, a base backup in progress is abandoned,
 * the embedded server stops, exit 0. The drain is bounded: SHUTDOWN_TIMEOUT_MS after the grace, requests still running get 503
 * `service shutting down`, function calls are aborted, in-flight statements cancelled and
 * connections closed (one log line says how many requests were cut); if closing still has
 * not finished 5 s later, exit 1.
 */
import { createHash } from 'node:crypto';
import { flushCompileCache } from 'node:module';
import { join } from 'node:path';
import { freePort, portIsFree } from './host/ports.ts';
import { ConfigError, loadConfig, type RuntimeConfig } from './core/config.ts';
import { originsFor } from './core/origins.ts';
import { createLogger } from './core/log.ts';
import { runAllMigrations } from './host/migrate.ts';
import { checkDatabase } from './host/preflight.ts';
import { startService, type Service } from './service.ts';
import { setupToken } from './dashboard/index.ts';
import { isEmbeddedUrl } from './host/embedded-url.ts';
import type { Embedded } from './host/embedded.ts';
import type { Backups } from './host/backup.ts';
import { clusterPlace, joinCluster, reportReady } from './core/cluster-worker.ts';
import { requestShare } from './core/cores.ts';
import type { WorkerSet } from './core/cluster.ts';

/** A start-up problem the operator must fix: one line, no stack. */
class StartError extends Error {
  override name = 'StartError';
}

/** The HTTP port, checked before anything starts (PostgreSQL, migrations, Deno). */
async function portOrStop(config: RuntimeConfig): Promise<void> {
  // A process of several does not: its siblings hold the port.
  if (config.port === 0 || place !== null) return;
  if (!(await portIsFree(config.port, config.host))) throw new StartError(`port ${config.port} on ${config.host} is in use: stop what uses it, or set PORT`);
}

async function loadOrExit(): Promise<RuntimeConfig> {
  try {
    return await loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(err.message + '\n');
      process.exit(1);
    }
    throw err;
  }
}

// As root in a folder the postgres user cannot enter, the embedded database lives elsewhere.
const embeddedModule = process.env.DATABASE_URL ? null : await import('./host/embedded.ts');
const movedDataDir = embeddedModule?.rootDataDir(process.env) ?? null;
if (movedDataDir) process.env.DATA_DIR = movedDataDir;
// One of WORKERS processes (src/core/cluster.ts): its share of the connection budget.
const place = clusterPlace();
const loaded = await loadOrExit();
const config: RuntimeConfig = place === null ? loaded : { ...loaded, dbPoolSize: requestShare(loaded.dbPoolSize, place.count, place.index) };
const log = createLogger(config.logLevel, { development: config.devMode, format: config.logFormat });

let embedded: Embedded | null = null;
let service: Service | null = null;
let backups: Backups | null = null;
let workerSet: WorkerSet | null = null;
let stopping = false;

async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  // /ready turns 503 at once; the listener still accepts for SHUTDOWN_GRACE_MS, so that a
  // load balancer notices before connections are refused.
  service?.drain();
  if (workerSet !== null) return stopWorkerSet(workerSet, signal);
  log.info({ signal, grace_ms: config.shutdownGraceMs }, 'shutting down: not ready; draining');
  if (service && config.shutdownGraceMs > 0) await new Promise((resolve) => setTimeout(resolve, config.shutdownGraceMs));
  // The deadline counts from the end of the grace.
  const deadline = setTimeout(() => void cut(), config.shutdownTimeoutMs);
  try {
    await Promise.all([service?.close(), backups?.stop()]);
    await embedded?.stop();
    await backups?.close();
  } catch (err) {
    log.error({ err }, 'shutdown failed');
    process.exit(1);
  }
  clearTimeout(deadline);
  process.exit(0);
}

/** The primary of WORKERS processes: each drains as one service does; exit 0 once all exited 0. */
async function stopWorkerSet(set: WorkerSet, signal: string): Promise<void> {
  log.info({ signal, workers: config.workers }, 'shutting down: draining every service process');
  const clean = await set.stop();
  try {
    await backups?.stop();
    await embedded?.stop();
    await backups?.close();
  } catch (err) {
    log.error({ err }, 'shutdown failed');
    process.exit(1);
  }
  process.exit(clean ? 0 : 1);
}

/** SHUTDOWN_TIMEOUT_MS passed with requests still in flight. */
async function cut(): Promise<void> {
  setTimeout(() => {
    log.error('shutdown did not finish 5 s after its deadline; exiting');
    process.exit(1);
  }, 5000).unref();
  const requests = (await service?.cut()) ?? 0;
  log.warn({ requests, timeout_ms: config.shutdownTimeoutMs }, `shutdown deadline reached: ${requests} requests cut, in-flight statements cancelled`);
}

/** The first 8 hex digits of a key's SHA-256: enough to tell which key is in use, nothing to sign with. */
function fingerprint(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

/**
 * The start-up lines on stdout. The keys themselves and the dashboard's setup link (both
 * credentials) in development mode (JWT_SECRET unset: its secret is a development one, and
 * stdout a developer's terminal), whatever the database, and at a start on the embedded
 * database; any other start prints a fingerprint per key, since stdout is then usually a log
 * collector and the service-role key bypasses every policy for ten years: `npm run keys`
 * prints them in the operator's terminal.
 */
function banner(url: string, embeddedUrl: string | null, setupLinkToken: string | null): string[] {
  const shown = config.devMode || embeddedUrl !== null;
  const keys = shown
    ? [`ANON_KEY=${config.anonKey}`, `SERVICE_ROLE_KEY=${config.serviceRoleKey}`]
    : [
        `ANON_KEY sha256:${fingerprint(config.anonKey)}`,
        `SERVICE_ROLE_KEY sha256:${fingerprint(config.serviceRoleKey)}`,
        `(keys are not printed when JWT_SECRET is set: \`npm run keys\` prints them; compare yours with: printf %s "$KEY" | sha256sum | cut -c1-8)`,
      ];
  return [
    `plinth listening on ${url}`,
    ...(embeddedUrl !== null ? [`DATABASE_URL=${embeddedUrl}  (embedded PostgreSQL, data in ${config.dataDir})`] : []),
    ...keys,
    `allowed origins (CORS and WebSockets): ${originsFor(config).describe()}`,
    ...(config.dashboardEnabled ? [`dashboard: ${url}/_/`] : []),
    ...(setupLinkToken !== null
      ? shown
        ? [`no dashboard admin yet: create one within the hour at ${url}/_/#/setup?token=${setupLinkToken}  (single use)`]
        : ['no dashboard admin yet: sign in to the dashboard with the service-role key (`npm run keys` prints it), or create a service_role account with it (POST /auth/v1/admin/users)']
      : []),
    ...(config.devMode ? [`development mode: JWT_SECRET is unset; a generated secret is kept in ${config.dataDir}`] : []),
  ];
}

process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));

/** One service in this process: alone, or one of WORKERS processes. */
async function startOne(databaseUrl: string): Promise<void> {
  service = await startService(config, log, { databaseUrl, place, worker: place === null || place.index === 1 });
  if (place !== null) joinCluster(service.deps.metrics);
  const { metrics } = service.deps;
  await startBackups((seconds) => metrics.backupLast.set(seconds));
  // Of several processes, process 1 alone writes the banner (and makes its setup link).
  const writesBanner = place === null || place.index === 1;
  const setup = config.dashboardEnabled && writesBanner ? await setupToken(service.db).catch(() => null) : null;
  // `npm run dev` hands the service the embedded database it started (src/host/embedded-url.ts).
  const local = embedded !== null || isEmbeddedUrl(config.databaseUrl, config.dataDir) ? databaseUrl : null;
  const lines = banner(service.url, local, setup);
  // Several processes: the primary prints process 1's banner once all of them listen.
  if (place !== null) reportReady(writesBanner ? lines : null);
  else process.stdout.write(lines.join('\n') + '\n');
}

/** The embedded database's base backups (BACKUP_DIR or S3), in the process that started it. */
async function startBackups(onTaken: (seconds: number) => void): Promise<void> {
  if (!embedded || (config.backupDir === null && config.backupS3Prefix === null)) return;
  const { openBackupStore, scheduleBackups, walSpool } = await import('./host/backup.ts');
  backups = scheduleBackups({
    store: (await openBackupStore(config))!,
    spool: config.backupDir === null ? walSpool(config.dataDir) : null,
    dataDir: config.dataDir,
    adminUrl: embedded.adminUrl,
    intervalMs: config.backupIntervalMs,
    retentionDays: config.backupRetentionDays,
    log,
    onTaken: (b) => onTaken(Date.parse(b.stopped_at) / 1000),
    // The dashboard's Backups view shows the last failure (of this process's schedule).
    onFailed: (await import('./dashboard/backups.ts')).noteBackupFailure,
  });
}

/** The primary of WORKERS processes: the port (a free one for PORT=0) decided here, then the processes, then one banner. */
async function startWorkers(databaseUrl: string): Promise<void> {
  const { startWorkerSet } = await import('./core/cluster.ts');
  const { ConnectionListener } = await import('./core/listener.ts');
  const { CONNECT_TIMEOUT_S } = await import('./core/lane/lanes.ts');
  const port = config.port === 0 ? await freePort(config.host) : config.port;
  const metricsPort = config.metricsPort === 0 ? await freePort(config.host) : config.metricsPort;
  const env: Record<string, string> = { DATABASE_URL: databaseUrl, PORT: String(port), MIGRATE_ON_START: 'false' };
  if (metricsPort !== null) env.METRICS_PORT = String(metricsPort);
  log.info({ workers: config.workers, port }, `starting ${config.workers} service processes on port ${port}`);
  // The instance's one LISTEN connection, here: the processes hear their channels through it (src/core/cluster-listener.ts).
  const listener = new ConnectionListener({ url: config.databaseDirectUrl ?? databaseUrl, applicationName: 'plinth-listener', log, connectTimeoutMs: CONNECT_TIMEOUT_S * 1000 });
  const set = await startWorkerSet({ workers: config.workers, log, env, listener });
  workerSet = set;
  await startBackups((seconds) => set.broadcast({ plinth: 'backup', seconds }));
  process.stdout.write(set.banner.join('\n') + '\n');
}

try {
  let databaseUrl = config.databaseUrl;
  if (databaseUrl === null && embeddedModule) {
    // One start per data folder, and the HTTP port checked before PostgreSQL starts.
    const { claimDataDir, runningStart, startEmbedded } = embeddedModule;
    const running = runningStart(config.dataDir);
    if (running) throw new StartError(`plinth already runs here on :${running.port} (pid ${running.pid})`);
    if (movedDataDir) process.stdout.write(`data folder: ${movedDataDir} (the postgres system user cannot enter ${process.cwd()}; set DATA_DIR to choose)\n`);
    await portOrStop(config);
    // BACKUP_DIR/wal, or with S3 the spool the service uploads from.
    const walArchiveDir =
      config.backupDir !== null ? join(config.backupDir, 'wal') : config.backupS3Prefix !== null ? (await import('./host/backup.ts')).walSpool(config.dataDir) : null;
    embedded = await startEmbedded(config.dataDir, log, { walArchiveDir });
    claimDataDir(config.dataDir, config.port);
    databaseUrl = embedded.url;
  } else {
    await portOrStop(config);
  }
  if (databaseUrl === null) throw new Error('no database');
  if (config.migrateOnStart) {
    await runAllMigrations(config.databaseDirectUrl ?? databaseUrl, config.anonymousRole, log, { secret: config.secret, requestPassword: config.dbRequestPassword, appFolder: config.migrationsDir });
  }
  await checkDatabase(config.databaseDirectUrl ?? databaseUrl, config.anonymousRole);
  if (config.workers > 1 && place === null) await startWorkers(databaseUrl);
  else await startOne(databaseUrl);
  // Node writes the compile cache at exit; written now, a service that is killed rather than
  // stopped starts from it next time too (what loads later is written at exit).
  flushCompileCache();
} catch (err) {
  // A problem the operator must fix (EmbeddedError, StartError, an email template's TemplateError) is one line, without a stack.
  if (!(err instanceof Error && (err.name === 'EmbeddedError' || err.name === 'StartError' || err.name === 'TemplateError'))) log.fatal({ err }, 'start failed');
  process.stderr.write(`start failed: ${err instanceof Error ? err.message : String(err)}\n`);
  // Set inside the start functions (TypeScript does not see it here).
  const started = { service: service as Service | null, workerSet: workerSet as WorkerSet | null, backups: backups as Backups | null, embedded };
  await started.service?.close().catch(() => {});
  await started.workerSet?.stop().catch(() => {});
  await started.backups?.stop().catch(() => {});
  await started.embedded?.stop().catch(() => {});
  await started.backups?.close().catch(() => {});
  process.exit(1);
}
