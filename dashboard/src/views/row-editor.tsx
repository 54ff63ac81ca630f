/**
 * A row's editor: one field per column, shaped by its type — JSON and arrays as JSON text,
 * booleans as a choice, timestamps as ISO 8601 text — with NULL as a box of its own, and a
 * column left alone on insert taking its default. "As JSON" edits the whole row as one
 * JSON object instead.
 */
import { useState } from 'preact/hooks';
import { Field } from '../ui.tsx';
import type { TableInfo } from './tables.tsx';

type Row = Record<string, unknown>;
interface Draft {
  text: string;
  isNull: boolean;
  /** Left alone: not sent (an insert takes the default, an update keeps the value). */
  untouched: boolean;
}

const isJson = (type: string) => type === 'json' || type === 'jsonb' || type.endsWith('[]');
const isTime = (type: string) => type.startsWith('timestamp') || type === 'date' || type.startsWith('time');

function toText(type: string, v: unknown): string {
  if (v === null || v === undefined) return '';
  if (isJson(type)) return JSON.stringify(v, null, 1);
  // An array column's value is an array: its text is its items joined, as before.
  // eslint-disable-next-line @typescript-eslint/no-base-to-string
  return String(v);
}

function fromText(name: string, type: string, text: string): unknown {
  if (isJson(type)) {
    try {
      return JSON.parse(text);
    } catch {
      throw new Error(`${name}: not JSON (${type.endsWith('[]') ? 'an array is written [1, 2]' : 'for example {"a": 1}'})`);
    }
  }
  if (type === 'boolean') return text === 'true';
  return text;
}

export function RowEditor(props: { table: TableInfo; row: Row | null; busy: boolean; onSave: (values: Row) => void; onCancel: () => void }) {
  const columns = props.table.columns.filter((c) => !c.generated);
  const [asJson, setAsJson] = useState(false);
  const [json, setJson] = useState(() =>
    JSON.stringify(props.row ? Object.fromEntries(columns.map((c) => [c.name, props.row![c.name]])) : Object.fromEntries(columns.filter((c) => c.default === null).map((c) => [c.name, null])), null, 2),
  );
  const [drafts, setDrafts] = useState<Record<string, Draft>>(() =>
    Object.fromEntries(columns.map((c) => [c.name, { text: toText(c.type, props.row?.[c.name]), isNull: props.row !== null && props.row[c.name] === null, untouched: true }])),
  );
  const [error, setError] = useState<string | null>(null);
  const set = (name: string, d: Partial<Draft>) => setDrafts({ ...drafts, [name]: { ...drafts[name], ...d, untouched: false } });
  const title = props.row ? 'Edit the row' : 'New row';
  const submit = () => {
    try {
      setError(null);
      if (asJson) return props.onSave(JSON.parse(json) as Row);
      const values: Row = {};
      for (const c of columns) {
        const d = drafts[c.name];
        if (d.untouched) continue;
        values[c.name] = d.isNull ? null : fromText(c.name, c.type, d.text);
      }
      props.onSave(values);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  return (
    <form
      class="editor panel"
      aria-label={title}
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <div class="inline">
        <strong>{title}</strong>
        <label class="check">
          <input type="checkbox" checked={asJson} onChange={(e) => setAsJson((e.target as HTMLInputElement).checked)} /> As JSON
        </label>
      </div>
      {asJson ? (
        <Field label={props.row ? 'Edit the row (JSON)' : 'New row (JSON)'}>
          <textarea rows={8} value={json} onInput={(e) => setJson((e.target as HTMLTextAreaElement).value)} spellcheck={false} />
        </Field>
      ) : (
        <div class="fields">
          {columns.map((c) => {
            const d = drafts[c.name];
            const hint = `${c.type}${props.row === null && c.default !== null ? `, default ${c.default}` : ''}${isTime(c.type) ? ', e.g. 2026-11-28T09:30:00Z' : ''}`;
            return (
              <Field label={c.name} hint={hint}>
                {c.type === 'boolean' ? (
                  <select disabled={d.isNull} value={d.text} onChange={(e) => set(c.name, { text: (e.target as HTMLSelectElement).value })}>
                    <option value="">–</option>
                    <option value="true">true</option>
                    <option value="false">false</option>
                  </select>
                ) : isJson(c.type) ? (
                  <textarea rows={3} disabled={d.isNull} value={d.text} spellcheck={false} onInput={(e) => set(c.name, { text: (e.target as HTMLTextAreaElement).value })} />
                ) : (
                  <input disabled={d.isNull} value={d.text} spellcheck={false} onInput={(e) => set(c.name, { text: (e.target as HTMLInputElement).value })} />
                )}
                {c.nullable && (
                  <span class="check">
                    <input type="checkbox" aria-label={`${c.name} is NULL`} checked={d.isNull} onChange={(e) => set(c.name, { isNull: (e.target as HTMLInputElement).checked })} /> NULL
                  </span>
                )}
              </Field>
            );
          })}
        </div>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <button type="submit" class="primary" disabled={props.busy}>
        {props.row ? 'Save' : 'Insert'}
      </button>{' '}
      <button type="button" onClick={props.onCancel}>
        Cancel
      </button>
    </form>
  );
}
