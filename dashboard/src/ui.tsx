/** Small shared pieces of the views: a table of rows, an error line, a labelled field. */
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { errorText } from './api.ts';

export function cell(v: unknown): string {
  if (v === null || v === undefined) return '∅';
  if (typeof v === 'object') return JSON.stringify(v);
  // What is left came from JSON: a string, a number or a boolean.
  return typeof v === 'string' ? v : JSON.stringify(v);
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
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return `'${s.replace(/'/g, "''")}'`;
}

export function ident(name: string): string {
  return /^[a-z_][a-z0-9_]*$/.test(name) ? name : `"${name.replace(/"/g, '""')}"`;
}

/** Icons of the navigation: 24×24 strokes in the text's colour. */
const ICONS: Record<string, string> = {
  tables: 'M3 5h18v14H3zM3 10h18M3 15h18M9 5v14',
  sql: 'M8 8l-4 4 4 4M16 8l4 4-4 4M13 6l-2 12',
  users: 'M9 11a4 4 0 1 0 0-8 4 4 0 0 0 0 8zM2 21v-1a6 6 0 0 1 12 0v1M16 3.5a4 4 0 0 1 0 7M22 21v-1a6 6 0 0 0-4-5.6',
  storage: 'M3 7l9-4 9 4-9 4zM3 12l9 4 9-4M3 17l9 4 9-4',
  webhooks: 'M10 13a5 5 0 0 0 7 0l3-3a5 5 0 0 0-7-7l-1 1M14 11a5 5 0 0 0-7 0l-3 3a5 5 0 0 0 7 7l1-1',
  functions: 'M13 2L4 14h7l-1 8 9-12h-7z',
  live: 'M12 12m-2 0a2 2 0 1 0 4 0 2 2 0 1 0-4 0M7 7a7 7 0 0 0 0 10M17 7a7 7 0 0 1 0 10M4 4a11 11 0 0 0 0 16M20 4a11 11 0 0 1 0 16',
  schedules: 'M12 21a9 9 0 1 0 0-18 9 9 0 0 0 0 18zM12 7v5l3 3',
  backups: 'M4 6c0-1.7 3.6-3 8-3s8 1.3 8 3-3.6 3-8 3-8-1.3-8-3zM4 6v12c0 1.7 3.6 3 8 3s8-1.3 8-3V6M4 12c0 1.7 3.6 3 8 3s8-1.3 8-3',
  logs: 'M4 19h16M4 15l4-5 4 3 5-7 3 3',
  settings: 'M4 6h10M18 6h2M4 12h4M12 12h8M4 18h12M20 18h0M14 4v4M8 10v4M16 16v4',
};

export function Icon({ name }: { name: string }) {
  return (
    <svg class="icon" viewBox="0 0 24 24" width="18" height="18" aria-hidden="true" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round">
      <path d={ICONS[name] ?? ''} />
    </svg>
  );
}

/** A SQL text shown before it is used, with a copy button. */
export function SqlBlock(props: { sql: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <figure class="sqlblock">
      <figcaption>
        <span>{props.label ?? 'SQL'}</span>
        <button
          type="button"
          class="small"
          onClick={() =>
            void navigator.clipboard?.writeText(props.sql).then(
              () => setCopied(true),
              () => setCopied(false),
            )
          }
        >
          {copied ? 'Copied' : 'Copy'}
        </button>
      </figcaption>
      <pre aria-label={props.label ?? 'SQL'}>{props.sql}</pre>
    </figure>
  );
}

export function Empty(props: { children: ComponentChildren }) {
  return <p class="empty">{props.children}</p>;
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '–';
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

/** An ISO time as `2026-11-28 20:15:03 UTC`. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '–';
  return iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, ' UTC');
}

/** Wait for `check` to hold, asking every `everyMs`, up to `limitMs`; true when it did. */
export async function poll(check: () => Promise<boolean>, limitMs = 30_000, everyMs = 500): Promise<boolean> {
  const until = Date.now() + limitMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
