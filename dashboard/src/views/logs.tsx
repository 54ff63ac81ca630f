/** Logs: the last requests this instance served, filterable by status and path. */
import { useState } from 'preact/hooks';
import { get } from '../api.ts';
import { DataTable, ErrorLine, Field, useLoad } from '../ui.tsx';

type Entry = Record<string, unknown>;

export function LogsView() {
  const log = useLoad(() => get<Entry[] | { requests: Entry[] }>('/api/requests'));
  const [status, setStatus] = useState('');
  const [path, setPath] = useState('');
  const entries = Array.isArray(log.data) ? log.data : (log.data?.requests ?? []);
  const shown = entries.filter((e) => {
    const s = String(e.status ?? '');
    const okStatus = status === '' || (status.endsWith('xx') ? s.startsWith(status[0]) : s === status);
    const p = String(e.path ?? e.url ?? e.route ?? '');
    return okStatus && (path === '' || p.includes(path));
  });
  return (
    <section aria-labelledby="logs-title">
      <h2 id="logs-title">Logs</h2>
      <p>The last requests served by the instance that serves this page (newest first).</p>
      <div class="inline">
        <Field label="Status" hint="e.g. 404 or 4xx">
          <input value={status} onInput={(e) => setStatus((e.target as HTMLInputElement).value.trim())} />
        </Field>
        <Field label="Path contains">
          <input value={path} onInput={(e) => setPath((e.target as HTMLInputElement).value)} />
        </Field>
        <button type="button" onClick={log.reload}>
          Refresh
        </button>
      </div>
      <ErrorLine error={log.error} />
      <DataTable caption={`Requests (${shown.length} of ${entries.length})`} rows={shown} />
    </section>
  );
}
