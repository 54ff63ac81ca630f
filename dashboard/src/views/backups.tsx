/**
 * Backups (GET /api/backups, docs/operations.md#backups): the base backups with their times
 * and sizes, the WAL archive, the window a restore reaches, the last error, and the exact
 * commands that restore the embedded database to a chosen time.
 */
import { useState } from 'preact/hooks';
import { get } from '../api.ts';
import { DataTable, Empty, ErrorLine, Field, SqlBlock, bytes, useLoad, when } from '../ui.tsx';

interface Backups {
  enabled: boolean;
  embedded?: boolean;
  store?: 'folder' | 's3';
  where?: string;
  env?: string;
  schedule_ms?: number;
  retention_days?: number;
  base?: { name: string; started_at: string; stopped_at: string; start_wal: string; bytes: number }[];
  wal?: { segments: number; bytes: number; first_at: string | null; last_at: string | null };
  restorable?: { from: string | null; to: string | null };
  last_error?: { at: string; message: string } | null;
}

const every = (ms: number) => (ms % 3_600_000 === 0 ? `${ms / 3_600_000} h` : `${Math.round(ms / 60_000)} min`);

export function BackupsView() {
  const b = useLoad(() => get<Backups>('/api/backups'));
  const [to, setTo] = useState('');
  const [into, setInto] = useState('/var/lib/plinth-restored');
  const d = b.data;
  const target = to || d?.restorable?.to || new Date().toISOString();
  const env = d?.store === 's3' ? `${d.env} S3_BUCKET=… S3_ACCESS_KEY_ID=… S3_SECRET_ACCESS_KEY=…` : d?.env;
  return (
    <section aria-labelledby="backups-title">
      <div class="titlebar">
        <h2 id="backups-title">Backups</h2>
        <button type="button" onClick={b.reload}>
          Refresh
        </button>
      </div>
      <ErrorLine error={b.error} />
      {d && !d.enabled && (
        <Empty>
          {d.embedded
            ? 'Backups are off. Set BACKUP_DIR (a folder, ideally on another disk) or BACKUP_S3_PREFIX, and plinth keeps base backups and the WAL archive of the embedded database, to restore it to any moment of the last BACKUP_RETENTION_DAYS days.'
            : "This service runs on your own PostgreSQL (DATABASE_URL): back it up with pgBackRest or your provider's backups."}
        </Empty>
      )}
      {d?.enabled && (
        <>
          <dl class="facts">
            <div>
              <dt>Stored in</dt>
              <dd>{d.where}</dd>
            </div>
            <div>
              <dt>Base backup every</dt>
              <dd>{every(d.schedule_ms!)}</dd>
            </div>
            <div>
              <dt>Kept</dt>
              <dd>{d.retention_days} days</dd>
            </div>
            <div>
              <dt>Restorable</dt>
              <dd>{d.restorable?.from ? `${when(d.restorable.from)} to ${when(d.restorable.to)}` : 'not yet: no base backup finished'}</dd>
            </div>
            <div>
              <dt>Last error</dt>
              <dd class={d.last_error ? 'error' : 'on'}>{d.last_error ? `${when(d.last_error.at)}: ${d.last_error.message}` : 'none since this start'}</dd>
            </div>
          </dl>
          {d.base!.length === 0 ? (
            <Empty>No base backup has finished yet: the first runs at start, then every {every(d.schedule_ms!)}.</Empty>
          ) : (
            <DataTable
              caption="Base backups, newest first"
              rows={d.base!.map((x) => ({ name: x.name, started: when(x.started_at), finished: when(x.stopped_at), size: bytes(x.bytes), 'first WAL': x.start_wal }))}
            />
          )}
          <DataTable
            caption="WAL archive"
            rows={[{ segments: d.wal!.segments, size: bytes(d.wal!.bytes), oldest: when(d.wal!.first_at), newest: when(d.wal!.last_at) }]}
          />
          <h3>Restore to a time</h3>
          <div class="inline">
            <Field label="Restore to" hint="ISO 8601 with its zone, e.g. 2026-11-28T09:26:00Z">
              <input value={to} placeholder={d.restorable?.to ?? ''} spellcheck={false} onInput={(e) => setTo((e.target as HTMLInputElement).value.trim())} />
            </Field>
            <Field label="Into a new folder">
              <input value={into} spellcheck={false} onInput={(e) => setInto((e.target as HTMLInputElement).value.trim())} />
            </Field>
          </div>
          <SqlBlock
            label="Restore commands"
            sql={`${env} npm run restore -- --to '${target}' --into ${into}\nDATA_DIR=${into} ${env} npm start`}
          />
          <p class="hint">
            The first command copies the newest base backup finished before that time and replays the WAL up to it, into a new folder; nothing else is touched. The second
            starts plinth on it (stop the running one first).
          </p>
        </>
      )}
    </section>
  );
}
