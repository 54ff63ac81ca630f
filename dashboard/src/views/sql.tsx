/** SQL: statements run through POST /api/sql, when the service has ENABLE_SQL_ENDPOINT=true. */
import { useState } from 'preact/hooks';
import { call } from '../api.ts';
import { DataTable, ErrorLine, Field, useAction } from '../ui.tsx';
import type { Settings } from './settings.tsx';

export function SqlView({ settings }: { settings: Settings | null }) {
  const [text, setText] = useState('select now();');
  const [rows, setRows] = useState<Record<string, unknown>[] | null>(null);
  const action = useAction();
  const enabled = settings?.features.sql_endpoint ?? false;
  return (
    <section aria-labelledby="sql-title">
      <h2 id="sql-title">SQL</h2>
      {!enabled ? (
        <p class="notice">
          The SQL editor runs statements through <code>POST /api/sql</code>, which is off. Start the service with <code>ENABLE_SQL_ENDPOINT=true</code> to use it here (for
          development and administration only: the statements run as <code>plinth_sql</code>, which may change <code>public</code> but is not a superuser).
        </p>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void action.run(async () => setRows((await call<Record<string, unknown>[]>('POST', '/api/sql', { body: { query: text } })).data));
          }}
        >
          <Field label="Statements (one transaction; the rows of the last one are shown)">
            <textarea rows={10} value={text} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} spellcheck={false} />
          </Field>
          <button type="submit" disabled={action.busy}>
            Run
          </button>
        </form>
      )}
      <ErrorLine error={action.error} />
      {rows && <DataTable caption="Result" rows={rows} />}
    </section>
  );
}
