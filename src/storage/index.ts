/**
 * The storage area (docs/api/storage.md): buckets and objects.
 *
 * Metadata and rules live in SQL (schema `storage`, sql/fixtures/storage), run as the
 * calling role, so the RLS policies decide; the bytes stream through the routes
 * (routes/) to one back end (STORAGE_BACKEND: database, disk or s3; see
 * backends/backend.ts). A back end that keeps bytes outside the database sweeps the
 * leftovers of interrupted uploads at start and hourly (`storage__sweep`). Files on disk are
 * private to the service's user (modes.ts): created 0600 in folders 0700, and a start
 * tightens what an older version left readable.
 */
import type { TaskList } from 'graphile-worker';
import type { Area, Deps } from '../core/area.ts';
import type { Backend } from './backends/backend.ts';
import { databaseBackend } from './backends/database.ts';
import { diskBackend } from './backends/disk.ts';
import { schedulePeriodic } from '../worker/periodic.ts';
import { tightenModes } from './modes.ts';
import * as sdb from './db.ts';
import { registerResumableRoutes, stagingFor, sweepResumable, type Staging } from './resumable.ts';
import { registerStorageRoutes } from './routes/index.ts';
import { ImageCache } from './transform.ts';

/** The S3 client (the AWS SDK, several MB of code and heap) loads only when it is the backend. */
export async function createBackend(deps: Deps): Promise<Backend> {
  const { config, db } = deps;
  switch (config.storageBackend) {
    case 'database':
      return databaseBackend(db);
    case 'disk':
      return diskBackend(config.storageDir, db);
    case 's3':
      return (await import('./backends/s3.ts')).s3Backend(config.s3!);
  }
}

const SWEEP_EVERY_SECONDS = 3600;

/** Per service instance: its back end and resumable staging, for the worker task. */
const backends = new WeakMap<Deps, { backend: Backend; staging: Staging; images: ImageCache }>();

async function sweep(deps: Deps, backend: Backend, staging: Staging, images: ImageCache): Promise<void> {
  const removed =
    (backend.sweep ? await backend.sweep() : 0) + (await sweepResumable(deps.db.sql, staging)) + (await images.sweep(deps.db.sql));
  if (removed > 0) deps.log.info({ removed }, 'storage: leftovers of interrupted and expired uploads removed');
}

/** Files an older version wrote readable by others: made private (the disk back end's folder and the image variants). */
async function tighten(deps: Deps, backend: Backend, images: ImageCache): Promise<void> {
  const roots = backend.name === 'disk' ? [deps.config.storageDir, images.dir] : [images.dir];
  try {
    const r = await tightenModes(roots);
    if (r.changed > 0) deps.log.info({ changed: r.changed }, 'storage: stored files made private to the service user');
    if (!r.complete) deps.log.warn({ roots, seen: r.seen }, 'storage: too many stored files to check their modes at start; run chmod -R go-rwx on these folders');
  } catch (err) {
    deps.log.warn({ err }, 'storage: could not tighten the modes of stored files');
  }
}

export const storageArea: Area = {
  name: 'storage',
  async register(app, deps) {
    const backend = await createBackend(deps);
    const staging = stagingFor(backend, deps.config.storageDir, deps.db.sql);
    const images = new ImageCache(deps.config.dataDir, { maxPixels: deps.config.imageMaxPixels, concurrency: deps.config.imageRenderConcurrency });
    backends.set(deps, { backend, staging, images });
    let started: Promise<void> = Promise.resolve();
    app.addHook('onClose', async () => {
      await started;
      await backend.close?.();
    });
    registerStorageRoutes(app, deps, backend, images);
    registerResumableRoutes(app, deps, backend, staging);
    // At start (a crash's leftovers, older files' modes), in the background; then hourly by the job.
    started = Promise.all([
      sweep(deps, backend, staging, images).catch((err: unknown) => deps.log.warn({ err }, 'storage: the sweep at start failed; the job will retry')),
      tighten(deps, backend, images),
    ]).then(() => {});
    await schedulePeriodic(deps.db.sql, 'storage__sweep', SWEEP_EVERY_SECONDS).catch((err: unknown) =>
      deps.log.warn({ err }, 'storage: could not schedule the sweep job; the next start will'),
    );
  },
  tasks(deps): TaskList {
    return {
      storage__sweep: async () => {
        const b = backends.get(deps);
        if (b) await sweep(deps, b.backend, b.staging, b.images);
        await sdb.purgeUploadTokens(deps.db.sql);
        await schedulePeriodic(deps.db.sql, 'storage__sweep', SWEEP_EVERY_SECONDS);
      },
    };
  },
};
