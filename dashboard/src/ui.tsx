/** Small shared pieces of the views: a table of rows, an error line, a labelled field. */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { errorText } from './api.ts';

export function cell(v: unknown): string {
  if (v === null || v === undefined) return '∅';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

export function DataTable(props: { rows: Record<string, unknown>[]; caption: string; actions?: (row: Record<string, unknown>, i: number) => ComponentChildren; columns?: string[] }) {
  const cols = props.columns ?? [...new Set(props.rows.flatMap((r) => Object.keys(r)))];
  if (props.rows.length === 0) return <p class="empty">{props.caption}: none.</p>;
  return (
    <div class="scroll">
      <table>
        <caption>{props.caption}</caption>
        <thead>
          <tr>
            {cols.map((c) => (
              <th scope="col">{c}</th>
            ))}
            {props.actions && <th scope="col">actions</th>}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((r, i) => (
            <tr>
              {cols.map((c) => (
                <td>{cell(r[c])}</td>
              ))}
              {props.actions && <td class="actions">{props.actions(r, i)}</td>}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function ErrorLine(props: { error: unknown }) {
  if (!props.error) return null;
  return (
    <p class="error" role="alert">
      {errorText(props.error)}
    </p>
  );
}

export function Field(props: { label: string; children: ComponentChildren; hint?: string }) {
  return (
    <label class="field">
      <span>{props.label}</span>
      {props.children}
      {props.hint && <small>{props.hint}</small>}
    </label>
  );
}

/** Load `fn` now and whenever `deps` change; `reload` runs it again. */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[] = []): { data: T | null; error: unknown; reload: () => void; loading: boolean } {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const [n, setN] = useState(0);
  useEffect(() => {
    let live = true;
    setLoading(true);
    fn().then(
      (d) => {
        if (!live) return;
        setData(d);
        setError(null);
        setLoading(false);
      },
      (e) => {
        if (!live) return;
        setError(e);
        setLoading(false);
      },
    );
    return () => {
      live = false;
    };
  }, [...deps, n]);
  return { data, error, loading, reload: () => setN((x) => x + 1) };
}

/** Run an action, keeping its error and a busy flag for the button. */
export function useAction(): { busy: boolean; error: unknown; run: (fn: () => Promise<unknown>) => Promise<void>; clear: () => void } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  return {
    busy,
    error,
    clear: () => setError(null),
    async run(fn) {
      setBusy(true);
      setError(null);
      try {
        await fn();
      } catch (e) {
        setError(e);
      } finally {
        setBusy(false);
      }
    },
  };
}

/** A SQL literal, for the statements the views show beside a change. */
export function literal(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  const s = typeof v === 'object' ? JSON.stringify(v) : String(v);
  return `'${s.replace(/'/g, "''")}'`;
}

export function ident(name: string): string {
  return /^[a-z_][a-z0-9_]*$/.test(name) ? name : `"${name.replace(/"/g, '""')}"`;
}
