/**
 * Schedules and job runs over /api/schedules and /api/runs (docs/api/schedules.md): the
 * schedules with their next tick; create one, pause or resume it, run it now, delete it; the
 * run log (outcome, duration, error) filtered by name, kind and outcome.
 */
import { useState } from 'preact/hooks';
import { call, get } from '../api.ts';
import { DataTable, Empty, ErrorLine, Field, useAction, useLoad, when } from '../ui.tsx';

interface Schedule {
  name: string;
  cron: string;
  target: string;
  payload: unknown;
  options: Record<string, unknown>;
  paused?: boolean;
  next_run_at: string | null;
}
interface Run {
  id: string;
  kind: string;
  name: string;
  attempt: number;
  max_attempts: number;
  started_at: string;
  duration_ms: number;
  outcome: string;
  error: string | null;
  request_id: string | null;
}

const value = (e: Event) => (e.target as HTMLInputElement).value;

export function SchedulesView() {
  const schedules = useLoad(() => get<Schedule[]>('/api/schedules'));
  const [filter, setFilter] = useState({ name: '', kind: '', outcome: '' });
  const query = new URLSearchParams(Object.entries(filter).filter(([, v]) => v !== '')).toString();
  const runs = useLoad(() => get<Run[]>(`/api/runs?limit=100${query ? `&${query}` : ''}`), [query]);
  const [form, setForm] = useState({ name: '', cron: '*/5 * * * *', target: '', payload: '{}', timezone: 'UTC' });
  const action = useAction();
  const act = (fn: () => Promise<unknown>) =>
    action.run(async () => {
      await fn();
      schedules.reload();
      runs.reload();
    });
  return (
    <section aria-labelledby="schedules-title">
      <div class="titlebar">
        <h2 id="schedules-title">Schedules</h2>
        <button
          type="button"
          onClick={() => {
            schedules.reload();
            runs.reload();
          }}
        >
          Refresh
        </button>
      </div>
      <p class="lead">
        Work no request starts, run once across all instances by the job worker. A target is <code>sql:schema.function</code> (a function taking one jsonb) or{' '}
        <code>function:name</code> (an edge function).
      </p>
      <form
        class="panel inline"
        aria-label="New schedule"
        onSubmit={(e) => {
          e.preventDefault();
          void act(async () => {
            let payload: unknown;
            try {
              payload = JSON.parse(form.payload || '{}');
            } catch {
              throw new Error('The payload is not JSON.');
            }
            await call('POST', '/api/schedules', { body: { name: form.name, cron: form.cron, target: form.target, payload, options: { timezone: form.timezone || 'UTC' } } });
            setForm({ ...form, name: '' });
          });
        }}
      >
        <Field label="Schedule name">
          <input required value={form.name} spellcheck={false} onInput={(e) => setForm({ ...form, name: value(e) })} />
        </Field>
        <Field label="Cron" hint="5 fields, 6 with seconds first, or @hourly, @daily…">
          <input required value={form.cron} spellcheck={false} onInput={(e) => setForm({ ...form, cron: value(e) })} />
        </Field>
        <Field label="Target" hint="sql:public.cleanup or function:report">
          <input required value={form.target} spellcheck={false} onInput={(e) => setForm({ ...form, target: value(e) })} />
        </Field>
        <Field label="Payload (JSON)">
          <input value={form.payload} spellcheck={false} onInput={(e) => setForm({ ...form, payload: value(e) })} />
        </Field>
        <Field label="Time zone">
          <input value={form.timezone} spellcheck={false} onInput={(e) => setForm({ ...form, timezone: value(e) })} />
        </Field>
        <button type="submit" class="primary" disabled={action.busy}>
          Create schedule
        </button>
      </form>
      <ErrorLine error={action.error} />
      <ErrorLine error={schedules.error} />
      {schedules.data?.length === 0 && <Empty>No schedule yet. Declare one above, or with plinth.schedule(…) in a migration.</Empty>}
      {schedules.data && schedules.data.length > 0 && (
        <DataTable
          caption="Schedules"
          rows={schedules.data.map((s) => ({
            name: s.name,
            cron: s.cron,
            target: s.target,
            'time zone': s.options.timezone,
            state: s.paused ? 'paused' : 'active',
            'next run': s.paused ? '–' : when(s.next_run_at),
          }))}
          actions={(r) => {
            const name = r.name as string;
            const paused = r.state === 'paused';
            return (
              <>
                <button type="button" aria-label={`Run ${name} now`} onClick={() => void act(() => call('POST', `/api/schedules/${encodeURIComponent(name)}/run`))}>
                  Run now
                </button>{' '}
                <button
                  type="button"
                  aria-label={`${paused ? 'Resume' : 'Pause'} ${name}`}
                  onClick={() => void act(() => call('POST', `/api/schedules/${encodeURIComponent(name)}/${paused ? 'resume' : 'pause'}`))}
                >
                  {paused ? 'Resume' : 'Pause'}
                </button>{' '}
                <button type="button" class="danger" aria-label={`Delete schedule ${name}`} onClick={() => void act(() => call('DELETE', `/api/schedules/${encodeURIComponent(name)}`))}>
                  Delete
                </button>
              </>
            );
          }}
        />
      )}
      <h3>Run log</h3>
      <div class="inline">
        <Field label="Name is">
          <input value={filter.name} spellcheck={false} onChange={(e) => setFilter({ ...filter, name: value(e).trim() })} />
        </Field>
        <Field label="Kind">
          <select value={filter.kind} onChange={(e) => setFilter({ ...filter, kind: value(e) })}>
            <option value="">any</option>
            <option value="schedule">schedule</option>
            <option value="queue">queue</option>
          </select>
        </Field>
        <Field label="Outcome">
          <select value={filter.outcome} onChange={(e) => setFilter({ ...filter, outcome: value(e) })}>
            <option value="">any</option>
            <option value="succeeded">succeeded</option>
            <option value="retrying">retrying</option>
            <option value="failed">failed</option>
          </select>
        </Field>
      </div>
      <ErrorLine error={runs.error} />
      {runs.data?.length === 0 && <Empty>No run {query ? 'matches these filters' : 'yet'}.</Empty>}
      {runs.data && runs.data.length > 0 && (
        <DataTable
          caption="Runs, newest first"
          rows={runs.data.map((r) => ({
            name: r.name,
            kind: r.kind,
            outcome: r.outcome,
            started: when(r.started_at),
            duration: `${r.duration_ms} ms`,
            attempt: `${r.attempt} of ${r.max_attempts}`,
            error: r.error,
            request: r.request_id ? r.request_id.slice(0, 8) : null,
          }))}
        />
      )}
    </section>
  );
}
