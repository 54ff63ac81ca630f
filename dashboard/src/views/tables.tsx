/** Tables: what REST exposes (columns, keys, RLS, policies, grants) and its rows, under the service role. */
import { useState } from 'preact/hooks';
import { call, get } from '../api.ts';
import { DataTable, Empty, ErrorLine, Field, ident, literal, useAction, useLoad } from '../ui.tsx';
import { NewTable, TableSchema } from './schema.tsx';
import { RowEditor } from './row-editor.tsx';

interface Column {
  name: string;
  type: string;
  nullable: boolean;
  default: string | null;
  primary_key: boolean;
  generated: boolean;
}
interface Policy {
  name: string;
  command: string;
  permissive: boolean;
  roles: string[];
  using: string | null;
  with_check: string | null;
}
export interface TableInfo {
  name: string;
  kind: string;
  rls: boolean;
  columns: Column[];
  policies: Policy[];
  grants: Record<string, string[]>;
}

type Row = Record<string, unknown>;
const PAGE = 50;

export function TablesView() {
  const tables = useLoad(() => get<TableInfo[]>('/api/tables'));
  const [selected, setSelected] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const table = tables.data?.find((t) => t.name === selected) ?? null;
  return (
    <section aria-labelledby="tables-title">
      <div class="titlebar">
        <h2 id="tables-title">Tables</h2>
        <button type="button" class="primary" aria-expanded={creating} onClick={() => setCreating(!creating)}>
          {creating ? 'Close the new table' : 'New table'}
        </button>
      </div>
      <ErrorLine error={tables.error} />
      {creating && (
        <NewTable
          onCreated={(name) => {
            setCreating(false);
            setSelected(name);
            tables.reload();
          }}
        />
      )}
      <div class="split">
        <nav aria-label="Tables and views" class="list">
          {tables.data?.length === 0 && <Empty>No table or view in public yet: make one with New table.</Empty>}
          <ul>
            {tables.data?.map((t) => (
              <li>
                <button type="button" aria-current={t.name === selected ? 'true' : undefined} onClick={() => setSelected(t.name)}>
                  {t.name} <small>{t.kind}</small>
                </button>
              </li>
            ))}
          </ul>
        </nav>
        <div class="detail">
          {table ? <TableDetail key={JSON.stringify(table)} table={table} onChanged={tables.reload} /> : <Empty>Choose a table to see its columns, policies, grants and rows.</Empty>}
        </div>
      </div>
    </section>
  );
}

function TableDetail({ table, onChanged }: { table: TableInfo; onChanged: () => void }) {
  const key = table.columns.filter((c) => c.primary_key).map((c) => c.name);
  return (
    <div>
      <h3>
        public.{table.name} <small>{table.kind}</small>
      </h3>
      <p>
        Row-level security: <strong class={table.rls ? 'on' : 'off'}>{table.rls ? 'on' : 'off'}</strong>
        {key.length > 0 && <> · primary key: {key.join(', ')}</>}
      </p>
      <DataTable
        caption="Columns"
        rows={table.columns.map((c) => ({ name: c.name, type: c.type, nullable: c.nullable ? 'yes' : 'no', default: c.default, key: c.primary_key ? 'primary' : '' }))}
      />
      <DataTable
        caption="Policies"
        rows={table.policies.map((p) => ({ name: p.name, command: p.command, roles: p.roles.join(', '), using: p.using, 'with check': p.with_check, kind: p.permissive ? 'permissive' : 'restrictive' }))}
      />
      <DataTable caption="Grants per API role" rows={Object.entries(table.grants).map(([role, privs]) => ({ role, privileges: privs.length ? privs.join(', ') : 'none' }))} />
      {table.kind === 'table' && <TableSchema table={table} onChanged={onChanged} />}
      <Rows table={table} keyColumns={key} />
    </div>
  );
}

function Rows({ table, keyColumns }: { table: TableInfo; keyColumns: string[] }) {
  const [query, setQuery] = useState('select=*');
  const [applied, setApplied] = useState('select=*');
  const [offset, setOffset] = useState(0);
  const path = `/rest/v1/${encodeURIComponent(table.name)}?${applied}${applied ? '&' : ''}limit=${PAGE}&offset=${offset}`;
  const rows = useLoad(() => get<Row[]>(path), [path]);
  const [editing, setEditing] = useState<{ row: Row | null } | null>(null);
  const [sql, setSql] = useState<string | null>(null);
  const action = useAction();
  const writable = table.kind === 'table';
  const match = (row: Row) => keyColumns.map((c) => `${encodeURIComponent(c)}=eq.${encodeURIComponent(String(row[c]))}`).join('&');
  const where = (row: Row) => keyColumns.map((c) => `${ident(c)} = ${literal(row[c])}`).join(' and ');

  const save = (values: Row) =>
    action.run(async () => {
      const cols = Object.keys(values);
      if (editing!.row === null) {
        await call('POST', `/rest/v1/${encodeURIComponent(table.name)}`, { body: values, headers: { prefer: 'return=minimal' } });
        setSql(
          cols.length === 0
            ? `insert into public.${ident(table.name)} default values;`
            : `insert into public.${ident(table.name)} (${cols.map(ident).join(', ')}) values (${cols.map((c) => literal(values[c])).join(', ')});`,
        );
      } else {
        await call('PATCH', `/rest/v1/${encodeURIComponent(table.name)}?${match(editing!.row)}`, { body: values, headers: { prefer: 'return=minimal' } });
        setSql(`update public.${ident(table.name)} set ${cols.map((c) => `${ident(c)} = ${literal(values[c])}`).join(', ')} where ${where(editing!.row)};`);
      }
      setEditing(null);
      rows.reload();
    });
  const remove = (row: Row) =>
    action.run(async () => {
      await call('DELETE', `/rest/v1/${encodeURIComponent(table.name)}?${match(row)}`);
      setSql(`delete from public.${ident(table.name)} where ${where(row)};`);
      rows.reload();
    });

  return (
    <div class="rows">
      <h4>Rows</h4>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          setOffset(0);
          setApplied(query.trim());
        }}
      >
        <Field label="Filters, order and columns (REST grammar)" hint="for example: select=id,title&done=eq.false&order=id.desc">
          <input value={query} onInput={(e) => setQuery((e.target as HTMLInputElement).value)} spellcheck={false} />
        </Field>
        <button type="submit">Run</button>
      </form>
      <p class="request">
        <code>GET {path}</code>
      </p>
      <ErrorLine error={rows.error} />
      <ErrorLine error={action.error} />
      {sql && (
        <p class="sql" aria-label="The change as SQL">
          <code>{sql}</code>
        </p>
      )}
      {writable && (
        <button type="button" onClick={() => setEditing({ row: null })}>
          Insert a row
        </button>
      )}
      {editing && <RowEditor key={JSON.stringify(editing.row)} table={table} row={editing.row} busy={action.busy} onSave={(v) => void save(v)} onCancel={() => setEditing(null)} />}
      {rows.data && (
        <DataTable
          caption={`Rows ${offset + 1}–${offset + rows.data.length}`}
          rows={rows.data}
          actions={
            writable && keyColumns.length > 0
              ? (row) => (
                  <>
                    <button type="button" onClick={() => setEditing({ row })} aria-label={`Edit row ${keyColumns.map((c) => row[c]).join(',')}`}>
                      Edit
                    </button>{' '}
                    <button type="button" class="danger" onClick={() => void remove(row)} aria-label={`Delete row ${keyColumns.map((c) => row[c]).join(',')}`}>
                      Delete
                    </button>
                  </>
                )
              : undefined
          }
        />
      )}
      <div class="pager">
        <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
          Previous
        </button>
        <button type="button" disabled={(rows.data?.length ?? 0) < PAGE} onClick={() => setOffset(offset + PAGE)}>
          Next
        </button>
      </div>
    </div>
  );
}
