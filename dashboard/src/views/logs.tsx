/**
 * Logs: the last requests this instance served (GET /api/requests), the application's apart
 * from the dashboard's own (whose request ids start with `dashboard-`), filtered by status,
 * method and route, with short request ids (the full one and the rest in a request's detail),
 * and a chart of requests, errors and p95 latency per minute over the last hour
 * (GET /api/requests/minutes, counted by the service as it answers).
 */
import { useState } from 'preact/hooks';
import { get } from '../api.ts';
import { DataTable, Empty, ErrorLine, Field, useLoad } from '../ui.tsx';

interface Entry {
  id: string;
  time: string;
  method: string;
  route: string | null;
  path: string;
  status: number;
  duration_ms: number;
  role: string | null;
  user_id: string | null;
}
interface Minute {
  minute: string;
  requests: number;
  errors: number;
  client_errors: number;
  p95_ms: number | null;
}

/** The dashboard's own requests: its files under /_/ and its calls (X-Request-Id dashboard-…), as the service counts them. */
const ownId = (e: Entry) => e.id.startsWith('dashboard-') || e.path === '/_' || e.path.startsWith('/_/');
const short = (id: string) => id.replace(/^dashboard-/, '').slice(0, 8);

function statusMatches(status: number, want: string): boolean {
  if (want === '') return true;
  if (/^[1-5]xx$/.test(want)) return Math.floor(status / 100) === Number(want[0]);
  if (want === 'errors') return status >= 400;
  return String(status) === want;
}

/** Requests (bars), errors (red bars over them) and p95 (a line, its own scale) per minute. */
export function Chart({ minutes }: { minutes: Minute[] }) {
  const W = 600;
  const H = 150;
  const top = 12;
  const base = H - 18;
  const maxN = Math.max(1, ...minutes.map((m) => m.requests));
  const maxP = Math.max(1, ...minutes.map((m) => m.p95_ms ?? 0));
  const bw = W / minutes.length;
  const y = (n: number) => base - ((base - top) * n) / maxN;
  const yp = (ms: number) => base - ((base - top) * ms) / maxP;
  const line = minutes
    .map((m, i) => (m.p95_ms === null ? null : `${(i * bw + bw / 2).toFixed(1)},${yp(m.p95_ms).toFixed(1)}`))
    .filter((p) => p !== null)
    .join(' ');
  const total = minutes.reduce((n, m) => n + m.requests, 0);
  const errors = minutes.reduce((n, m) => n + m.errors, 0);
  const label = `Last hour: ${total} requests, ${errors} errors (5xx), highest p95 ${maxP === 1 && total === 0 ? 'none' : `${maxP} ms`}, per minute`;
  return (
    <figure class="chart">
      <figcaption>
        <span class="key req">requests (max {maxN}/min)</span> <span class="key err">errors 5xx</span> <span class="key p95">p95 latency (max {maxP} ms)</span>
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={label} preserveAspectRatio="none">
        <line x1="0" y1={base} x2={W} y2={base} stroke="#d9dee4" />
        {minutes.map((m, i) => (
          <g>
            <title>{`${m.minute.slice(11, 16)} UTC: ${m.requests} requests, ${m.errors} errors, p95 ${m.p95_ms ?? '–'} ms`}</title>
            <rect x={i * bw + 1} y={y(m.requests)} width={Math.max(1, bw - 2)} height={base - y(m.requests)} fill="#9db6ea" />
            {m.errors > 0 && <rect x={i * bw + 1} y={y(m.errors)} width={Math.max(1, bw - 2)} height={base - y(m.errors)} fill="#d92d20" />}
          </g>
        ))}
        {line && <polyline points={line} fill="none" stroke="#b54708" stroke-width="2" vector-effect="non-scaling-stroke" />}
        {minutes.map((m, i) => m.p95_ms !== null && <rect x={i * bw + bw / 2 - 2} y={yp(m.p95_ms) - 2} width="4" height="4" fill="#b54708" />)}
      </svg>
      <div class="axis">
        <span>{minutes[0]?.minute.slice(11, 16)} UTC</span>
        <span>now</span>
      </div>
    </figure>
  );
}

export function LogsView() {
  const [source, setSource] = useState<'app' | 'dashboard'>('app');
  const log = useLoad(() => get<{ requests: Entry[] }>('/api/requests'));
  const minutes = useLoad(() => get<{ minutes: Minute[] }>(`/api/requests/minutes?source=${source}`), [source]);
  const [status, setStatus] = useState('');
  const [method, setMethod] = useState('');
  const [route, setRoute] = useState('');
  const [path, setPath] = useState('');
  const [open, setOpen] = useState<string | null>(null);
  const all = (log.data?.requests ?? []).filter((e) => ownId(e) === (source === 'dashboard'));
  const routes = [...new Set(all.map((e) => e.route ?? '(no route)'))].sort();
  const shown = all.filter(
    (e) => statusMatches(e.status, status) && (method === '' || e.method === method) && (route === '' || (e.route ?? '(no route)') === route) && (path === '' || e.path.includes(path)),
  );
  const detail = all.find((e) => e.id === open) ?? null;
  const reload = () => {
    log.reload();
    minutes.reload();
  };
  return (
    <section aria-labelledby="logs-title">
      <div class="titlebar">
        <h2 id="logs-title">Logs</h2>
        <button type="button" onClick={reload}>
          Refresh
        </button>
      </div>
      <div class="tabs" role="group" aria-label="Whose requests">
        <button type="button" aria-pressed={source === 'app'} onClick={() => setSource('app')}>
          The app's requests
        </button>
        <button type="button" aria-pressed={source === 'dashboard'} onClick={() => setSource('dashboard')}>
          The dashboard's own
        </button>
      </div>
      <ErrorLine error={minutes.error} />
      {minutes.data && <Chart minutes={minutes.data.minutes} />}
      <div class="inline filters">
        <Field label="Status">
          <select value={status} onChange={(e) => setStatus((e.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            <option value="errors">4xx and 5xx</option>
            <option value="2xx">2xx</option>
            <option value="3xx">3xx</option>
            <option value="4xx">4xx</option>
            <option value="5xx">5xx</option>
            {[...new Set(all.map((e) => e.status))].sort().map((s) => (
              <option value={String(s)}>{s}</option>
            ))}
          </select>
        </Field>
        <Field label="Method">
          <select value={method} onChange={(e) => setMethod((e.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            {['GET', 'POST', 'PATCH', 'PUT', 'DELETE', 'HEAD', 'OPTIONS'].map((m) => (
              <option value={m}>{m}</option>
            ))}
          </select>
        </Field>
        <Field label="Route">
          <select value={route} onChange={(e) => setRoute((e.target as HTMLSelectElement).value)}>
            <option value="">any</option>
            {routes.map((r) => (
              <option value={r}>{r}</option>
            ))}
          </select>
        </Field>
        <Field label="Path contains">
          <input value={path} spellcheck={false} onInput={(e) => setPath((e.target as HTMLInputElement).value)} />
        </Field>
      </div>
      <ErrorLine error={log.error} />
      {log.data && shown.length === 0 && <Empty>{all.length === 0 ? 'No request yet since this instance started.' : 'No request matches these filters.'}</Empty>}
      {shown.length > 0 && (
        <DataTable
          caption={`Requests, newest first (${shown.length} of ${all.length})`}
          columns={['time', 'method', 'path', 'status', 'ms', 'role']}
          rows={shown.map((e) => ({ time: e.time.slice(11, 19), method: e.method, path: e.path, status: e.status, ms: Math.round(e.duration_ms * 10) / 10, role: e.role }))}
          actions={(_r, i) => (
            <button type="button" class="small mono" aria-label={`Request ${shown[i].id}`} aria-expanded={open === shown[i].id} onClick={() => setOpen(open === shown[i].id ? null : shown[i].id)}>
              {short(shown[i].id)}
            </button>
          )}
        />
      )}
      {detail && (
        <section class="panel" aria-labelledby="request-title">
          <h3 id="request-title">
            {detail.method} {detail.path} <small>{detail.status}</small>
          </h3>
          <dl class="facts">
            {Object.entries(detail).map(([k, v]) => (
              <div>
                <dt>{k}</dt>
                <dd class={k === 'id' ? 'mono' : undefined}>{v === null ? '∅' : String(v)}</dd>
              </div>
            ))}
          </dl>
          <button type="button" onClick={() => setOpen(null)}>
            Close
          </button>
        </section>
      )}
    </section>
  );
}
