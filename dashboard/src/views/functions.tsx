/** Functions: the catalog; invoke one with a JSON body as a chosen role, and see the whole answer. */
import { useState } from 'preact/hooks';
import { call, get, type Answer } from '../api.ts';
import { DataTable, ErrorLine, Field, useAction, useLoad } from '../ui.tsx';
import type { Settings } from './settings.tsx';

interface Fn {
  name: string;
  runtime: string;
  status: string;
  verify_jwt: boolean;
}

export function FunctionsView({ settings }: { settings: Settings | null }) {
  const fns = useLoad(() => get<Fn[]>('/functions/v1/'));
  const [name, setName] = useState('');
  const [role, setRole] = useState<'service' | 'anon' | 'user'>('service');
  const [userToken, setUserToken] = useState('');
  const [body, setBody] = useState('{}');
  const [answer, setAnswer] = useState<Answer<unknown> | null>(null);
  const action = useAction();
  const invoke = () =>
    action.run(async () => {
      JSON.parse(body);
      const token = role === 'service' ? undefined : role === 'anon' ? (settings?.anon_key ?? null) : userToken;
      setAnswer(await call('POST', `/functions/v1/${encodeURIComponent(name)}`, { raw: body, headers: { 'content-type': 'application/json' }, token, anyStatus: true }));
    });
  return (
    <section aria-labelledby="functions-title">
      <h2 id="functions-title">Functions</h2>
      <ErrorLine error={fns.error} />
      <DataTable
        caption="Catalog"
        rows={(fns.data ?? []).map((f) => ({ ...f, verify_jwt: f.verify_jwt ? 'yes' : 'no' }))}
        actions={(f) => (
          <button type="button" onClick={() => setName(f.name as string)} aria-label={`Invoke ${f.name as string}`}>
            Invoke
          </button>
        )}
      />
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void invoke();
        }}
      >
        <Field label="Function">
          <input required value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        </Field>
        <Field label="Call as">
          <select value={role} onChange={(e) => setRole((e.target as HTMLSelectElement).value as typeof role)}>
            <option value="service">service role (you)</option>
            <option value="anon">anon key</option>
            <option value="user">a user's access token</option>
          </select>
        </Field>
        {role === 'user' && (
          <Field label="Access token">
            <input value={userToken} onInput={(e) => setUserToken((e.target as HTMLInputElement).value)} />
          </Field>
        )}
        <Field label="JSON body">
          <textarea rows={6} value={body} onInput={(e) => setBody((e.target as HTMLTextAreaElement).value)} spellcheck={false} />
        </Field>
        <button type="submit" disabled={action.busy}>
          Invoke
        </button>
      </form>
      <ErrorLine error={action.error} />
      {answer && (
        <div class="answer" aria-label="Function answer">
          <p>
            Status <strong>{answer.status}</strong> in {answer.ms} ms
          </p>
          <DataTable caption="Headers" rows={[...answer.headers.entries()].map(([header, value]) => ({ header, value }))} />
          <pre>{answer.text}</pre>
        </div>
      )}
    </section>
  );
}
