/**
 * GET /api/backups, for the dashboard's Backups view (docs/operations.md#backups): what the
 * backup store holds — each finished base backup with its times and size, the WAL archive
 * (segments, bytes, first and last stored), the window a restore can reach, the last error
 * this process met taking a base backup or uploading WAL — and the settings a restore
 * command names. With no BACKUP_DIR or BACKUP_S3_PREFIX: `{"enabled": false}`.
 */
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../core/area.ts';
import { listBackups, openBackupStore } from '../host/backup.ts';

/** The last failure of this process's backups (set by the schedule in src/boot.ts). */
let lastError: { at: string; message: string } | null = null;

export function noteBackupFailure(err: unknown): void {
  lastError = { at: new Date().toISOString(), message: err instanceof Error ? err.message : String(err) };
}

const SEGMENT = /^[0-9A-F]{24}$/;

export function registerBackupRoutes(app: FastifyInstance, { config, credentials }: Deps): void {
  app.get('/api/backups', { onRequest: credentials.requireRole('service_role') }, async (_req, reply) => {
    reply.header('cache-control', 'no-store');
    const store = await openBackupStore(config);
    if (store === null) return reply.send({ enabled: false, embedded: config.databaseUrl === null });
    try {
      const base = await listBackups(store);
      const withBytes = [];
      for (const b of base) withBytes.push({ name: b.name, started_at: b.started_at, stopped_at: b.stopped_at, start_wal: b.start_wal, bytes: await store.bytes(`base/${b.name}/`) });
      const segments = (await store.segments()).filter((s) => SEGMENT.test(s.name));
      const stored = segments.map((s) => s.stored).sort((a, b) => a - b);
      const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
      return reply.send({
        enabled: true,
        store: config.backupDir !== null ? 'folder' : 's3',
        where: store.where,
        // What a restore command sets: the folder, or the prefix beside the S3_* settings.
        env: config.backupDir !== null ? `BACKUP_DIR=${config.backupDir}` : `BACKUP_S3_PREFIX=${config.backupS3Prefix}`,
        schedule_ms: config.backupIntervalMs,
        retention_days: config.backupRetentionDays,
        base: withBytes.reverse(),
        wal: { segments: segments.length, bytes: segments.reduce((n, s) => n + s.bytes, 0), first_at: iso(stored[0]), last_at: iso(stored.at(-1)) },
        restorable: { from: base[0]?.stopped_at ?? null, to: iso(stored.at(-1)) ?? base.at(-1)?.stopped_at ?? null },
        last_error: lastError,
      });
    } finally {
      await store.close();
    }
  });
}
