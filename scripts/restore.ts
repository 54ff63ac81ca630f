/**
 * `npm run restore -- --to <timestamp> --into <folder>`: the embedded PostgreSQL as it was
 * at <timestamp>, from the base backups and WAL archive of BACKUP_DIR or BACKUP_S3_PREFIX, into a new data folder
 * that `DATA_DIR=<folder> npm start` then uses (docs/operations.md#backups).
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { ConfigError, parseConfig } from '../src/core/config.ts';
import { createLogger } from '../src/core/log.ts';
import { openBackupStore, restore } from '../src/host/backup.ts';

const usage = 'usage: npm run restore -- --to <timestamp> --into <new folder>   (BACKUP_DIR or BACKUP_S3_PREFIX names the backups)';
let args;
try {
  args = parseArgs({ options: { to: { type: 'string' }, into: { type: 'string' } } }).values;
} catch (err) {
  process.stderr.write(`restore: ${(err as Error).message}\n${usage}\n`);
  process.exit(1);
}
if (!args.to || !args.into) {
  process.stderr.write(usage + '\n');
  process.exit(1);
}
try {
  const config = parseConfig(process.env);
  const store = await openBackupStore(config);
  if (store === null) throw new ConfigError('BACKUP_DIR', 'is not set (nor BACKUP_S3_PREFIX): name where the backups are');
  const into = resolve(args.into);
  let from;
  try {
    from = await restore(store, args.to, into, createLogger(config.logLevel, { format: config.logFormat }));
  } finally {
    await store.close();
  }
  const where = config.backupDir !== null ? `BACKUP_DIR=${config.backupDir}` : `BACKUP_S3_PREFIX=${config.backupS3Prefix}`;
  process.stdout.write(`restored to ${args.to} from the base backup ${from.name} into ${into}\nstart on it with: DATA_DIR=${into} ${where} npm start\n`);
} catch (err) {
  // A problem the operator must fix is one line (S3's answer or an unreachable S3 too); anything else keeps its stack.
  const known = err instanceof ConfigError || (err instanceof Error && (err.name === 'RestoreError' || err.name === 'EmbeddedError'));
  const s3 = err instanceof Error && ('$metadata' in err || /^(ECONNREFUSED|ENOTFOUND|ETIMEDOUT|ECONNRESET|EAI_AGAIN)$/.test((err as NodeJS.ErrnoException).code ?? ''));
  const text = err instanceof Error ? (known ? err.message : s3 ? `S3: ${err.name === 'Error' ? '' : `${err.name}: `}${err.message}` : (err.stack ?? err.message)) : String(err);
  process.stderr.write(`restore failed: ${text}\n`);
  process.exit(1);
}
