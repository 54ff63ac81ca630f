/** Webhooks: list, create, delete; each webhook's delivery log with its attempts, and a failed delivery redelivered. */
import { useState } from 'preact/hooks';
import { call, get } from '../api.ts';
import { DataTable, ErrorLine, Field, useAction, useLoad } from '../ui.tsx';

interface Webhook {
  id: string;
  url: string;
  events: string[];
  table_name: string;
  created_at: string;
}
interface Attempt {
  attempt: number;
  status: number | null;
  error: string | null;
  duration_ms: number;
  attempted_at: string;
}
interface Delivery {
  id: string;
  event: string;
  table: string;
  state: string;
  created_at: string;
  attempts: Attempt[];
}

const EVENTS = ['INSERT', 'UPDATE', 'DELETE', '*'];

export function WebhooksView() {
  const hooks = useLoad(() => get<Webhook[]>('/rest/v1/webhooks'));
  const [selected, setSelected] = useState<string | null>(null);
  const [form, setForm] = useState({ url: '', table: '', events: ['INSERT', 'UPDATE', 'DELETE'], secret: '' });
  const action = useAction();
  return (
    <section aria-labelledby="webhooks-title">
      <h2 id="webhooks-title">Webhooks</h2>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void action.run(async () => {
            const created = await call<Webhook>('POST', '/rest/v1/webhooks', {
              body: { url: form.url, table_name: form.table || '*', events: form.events, ...(form.secret ? { secret: form.secret } : {}) },
            });
            setSelected(created.data.id);
            setForm({ ...form, url: '', secret: '' });
            hooks.reload();
          });
        }}
      >
        <Field label="URL">
          <input type="url" required value={form.url} onInput={(e) => setForm({ ...form, url: (e.target as HTMLInputElement).value })} />
        </Field>
        <Field label="Table" hint="a table of public, or * for all">
          <input value={form.table} placeholder="*" onInput={(e) => setForm({ ...form, table: (e.target as HTMLInputElement).value })} />
        </Field>
        <fieldset>
          <legend>Events</legend>
          {EVENTS.map((ev) => (
            <label class="check">
              <input
                type="checkbox"
                checked={form.events.includes(ev)}
                onChange={(e) => setForm({ ...form, events: (e.target as HTMLInputElement).checked ? [...form.events, ev] : form.events.filter((x) => x !== ev) })}
              />{' '}
              {ev}
            </label>
          ))}
        </fieldset>
        <Field label="Signing secret (optional)">
          <input type="password" autocomplete="off" value={form.secret} onInput={(e) => setForm({ ...form, secret: (e.target as HTMLInputElement).value })} />
        </Field>
        <button type="submit" disabled={action.busy}>
          Create webhook
        </button>
      </form>
      <ErrorLine error={action.error} />
      <ErrorLine error={hooks.error} />
      <DataTable
        caption="Webhooks"
        rows={(hooks.data ?? []).map((h) => ({ ...h, events: h.events.join(', ') }))}
        columns={['table_name', 'events', 'url', 'created_at']}
        actions={(h) => (
          <>
            <button type="button" onClick={() => setSelected(h.id as string)} aria-label={`Deliveries of ${h.url as string}`}>
              Deliveries
            </button>{' '}
            <button
              type="button"
              class="danger"
              onClick={() =>
                void action.run(async () => {
                  await call('DELETE', `/rest/v1/webhooks/${h.id as string}`);
                  if (selected === h.id) setSelected(null);
                  hooks.reload();
                })
              }
              aria-label={`Delete webhook ${h.url as string}`}
            >
              Delete
            </button>
          </>
        )}
      />
      {selected && <Deliveries key={selected} id={selected} />}
    </section>
  );
}

function Deliveries({ id }: { id: string }) {
  const log = useLoad(() => get<Delivery[]>(`/rest/v1/webhooks/${id}/deliveries?limit=100`), [id]);
  const action = useAction();
  const rows = log.data ?? [];
  return (
    <div>
      <h3>Delivery log</h3>
      <button type="button" onClick={log.reload}>
        Refresh
      </button>
      <ErrorLine error={log.error} />
      <ErrorLine error={action.error} />
      {log.data && (
        <DataTable
          caption="Deliveries, newest first"
          rows={rows.map((d) => ({
            event: d.event,
            table: d.table,
            state: d.state,
            created_at: d.created_at,
            attempts: d.attempts.map((a) => `#${a.attempt} ${a.status ?? a.error ?? ''} in ${a.duration_ms} ms at ${a.attempted_at}`).join('; '),
          }))}
          actions={(_row, i) =>
            rows[i].state === 'failed' ? (
              <button
                type="button"
                disabled={action.busy}
                aria-label={`Redeliver ${rows[i].event} of ${rows[i].created_at}`}
                onClick={() =>
                  void action.run(async () => {
                    await call('POST', `/rest/v1/webhooks/${id}/deliveries/${rows[i].id}/redeliver`);
                    log.reload();
                  })
                }
              >
                Redeliver
              </button>
            ) : null
          }
        />
      )}
    </div>
  );
}
