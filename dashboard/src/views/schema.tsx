/**
 * Schema changes as migrations: a new table (columns, types, defaults, primary key, foreign
 * keys, an owner column, RLS with a policy template, grants), and on a table: add, rename or
 * drop a column, RLS with a policy, a grant. Each change is shown as SQL first
 * (POST /api/dashboard/schema); in development it is then appended to the app's
 * migrations/current.sql, which `npm run dev`'s watch applies; against a production
 * database the SQL is offered to copy into a migration, never run.
 */
import { useState } from 'preact/hooks';
import { call, get } from '../api.ts';
import { ErrorLine, Field, SqlBlock, poll, useAction } from '../ui.tsx';
import type { TableInfo } from './tables.tsx';

type Action = Record<string, unknown>;
interface Planned {
  sql: string;
  mode: 'development' | 'production';
  file: string | null;
  appended?: boolean;
}

const TYPES = ['text', 'bigint', 'integer', 'numeric', 'boolean', 'uuid', 'timestamptz', 'date', 'jsonb', 'text[]', 'bigint[]', 'double precision'];
const ROLES = ['anon', 'authenticated'];
const PRIVILEGES = ['select', 'insert', 'update', 'delete'];
const TEMPLATES: Record<string, string> = {
  none: 'No policy',
  owner_only: 'Owner only: each user reads and writes their own rows',
  read_all_write_owner: 'Read for everyone, write for the owner',
};

const value = (e: Event) => (e.target as HTMLInputElement).value;
const checked = (e: Event) => (e.target as HTMLInputElement).checked;

/**
 * The SQL of `actions`, then its use: appended to current.sql (development) or offered to
 * copy (production). `settled` is asked after an append until it holds (the watch applied it).
 */
export function ChangePanel(props: { actions: Action[] | null; title: string; settled?: () => Promise<boolean>; onDone?: () => void }) {
  const [plan, setPlan] = useState<(Planned & { actions: Action[] }) | null>(null);
  const [state, setState] = useState<string | null>(null);
  const action = useAction();
  const preview = () =>
    action.run(async () => {
      setState(null);
      const actions = props.actions!;
      setPlan({ ...(await call<Planned>('POST', '/api/dashboard/schema', { body: { actions } })).data, actions });
    });
  // Exactly the actions whose SQL is shown (the panel is made anew when the form changes).
  const apply = () =>
    action.run(async () => {
      const r = { ...(await call<Planned>('POST', '/api/dashboard/schema', { body: { actions: plan!.actions, apply: true } })).data, actions: plan!.actions };
      setPlan(r);
      setState(`Appended to ${r.file}. Waiting for the migrations watch of npm run dev to apply it…`);
      if (props.settled && !(await poll(props.settled, 60_000))) {
        setState(`Appended to ${r.file}, not applied yet: is npm run dev running? Its terminal shows the watch's errors.`);
        return;
      }
      setState(`Appended to ${r.file} and applied.`);
      props.onDone?.();
    });
  return (
    <div class="change">
      <button type="button" disabled={!props.actions || action.busy} onClick={() => void preview()}>
        Show the SQL
      </button>
      <ErrorLine error={action.error} />
      {plan && (
        <>
          <SqlBlock sql={plan.sql} label={`SQL: ${props.title}`} />
          {plan.mode === 'development' ? (
            !plan.appended && (
              <button type="button" class="primary" disabled={action.busy} onClick={() => void apply()}>
                Append to {plan.file}
              </button>
            )
          ) : (
            <p class="notice">This service runs against a production database: put this SQL in a migration (nothing here runs it).</p>
          )}
        </>
      )}
      {state && (
        <p class="status" role="status">
          {state}
        </p>
      )}
    </div>
  );
}

interface ColumnDraft {
  name: string;
  type: string;
  default: string;
  nullable: boolean;
  primary_key: boolean;
  identity: boolean;
  references: string;
}

const blank = (): ColumnDraft => ({ name: '', type: 'text', default: '', nullable: true, primary_key: false, identity: false, references: '' });

function columnAction(c: ColumnDraft): Action {
  const ref = c.references.trim();
  const dot = ref.lastIndexOf('.');
  return {
    name: c.name.trim(),
    type: c.type.trim(),
    default: c.default.trim() || undefined,
    nullable: c.nullable && !c.primary_key,
    primary_key: c.primary_key,
    identity: c.identity,
    references: ref ? { table: ref.slice(0, dot), column: ref.slice(dot + 1), on_delete: 'cascade' } : undefined,
  };
}

function ColumnFields({ c, set, index }: { c: ColumnDraft; set: (c: ColumnDraft) => void; index: number }) {
  return (
    <fieldset class="column">
      <legend>Column {index + 1}</legend>
      <Field label="Name">
        <input value={c.name} spellcheck={false} onInput={(e) => set({ ...c, name: value(e) })} />
      </Field>
      <Field label="Type">
        <input value={c.type} list="pg-types" spellcheck={false} onInput={(e) => set({ ...c, type: value(e) })} />
      </Field>
      <Field label="Default" hint="a literal, now(), gen_random_uuid(), auth.uid()">
        <input value={c.default} spellcheck={false} disabled={c.identity} onInput={(e) => set({ ...c, default: value(e) })} />
      </Field>
      <Field label="References" hint="table.column, or auth.users.id">
        <input value={c.references} spellcheck={false} onInput={(e) => set({ ...c, references: value(e) })} />
      </Field>
      <label class="check">
        <input type="checkbox" checked={!c.nullable} onChange={(e) => set({ ...c, nullable: !checked(e) })} /> Not null
      </label>
      <label class="check">
        <input type="checkbox" checked={c.primary_key} onChange={(e) => set({ ...c, primary_key: checked(e) })} /> Primary key
      </label>
      <label class="check">
        <input type="checkbox" checked={c.identity} onChange={(e) => set({ ...c, identity: checked(e) })} /> Identity
      </label>
    </fieldset>
  );
}

function Grants({ grants, set }: { grants: Record<string, string[]>; set: (g: Record<string, string[]>) => void }) {
  return (
    <fieldset>
      <legend>Grants to the API roles</legend>
      {ROLES.map((role) => (
        <div class="inline">
          <strong class="role">{role}</strong>
          {PRIVILEGES.map((p) => (
            <label class="check">
              <input
                type="checkbox"
                aria-label={`${role} ${p}`}
                checked={grants[role]?.includes(p) ?? false}
                onChange={(e) => set({ ...grants, [role]: checked(e) ? [...(grants[role] ?? []), p] : (grants[role] ?? []).filter((x) => x !== p) })}
              />{' '}
              {p}
            </label>
          ))}
        </div>
      ))}
    </fieldset>
  );
}

function grantActions(table: string, grants: Record<string, string[]>): Action[] {
  return Object.entries(grants)
    .filter(([, privileges]) => privileges.length > 0)
    .map(([role, privileges]) => ({ action: 'grant', table, roles: [role], privileges }));
}

/**
 * REST's schema cache has caught up with `table` (/api/tables reads the catalog itself, REST
 * its cache, refreshed a moment after a migration): its OpenAPI definition has the table's
 * columns, so the rows load without a 404 or a stale column.
 */
async function restServes(table: TableInfo | undefined): Promise<boolean> {
  if (table === undefined) return false;
  const doc = await get<{ definitions?: Record<string, { properties?: Record<string, unknown> }> }>('/rest/v1/');
  const served = Object.keys(doc.definitions?.[table.name]?.properties ?? {});
  return served.length === table.columns.length && table.columns.every((c) => served.includes(c.name));
}

const tableListed = (name: string) => async () => restServes((await get<TableInfo[]>('/api/tables')).find((t) => t.name === name));

export function NewTable({ onCreated }: { onCreated: (name: string) => void }) {
  const [name, setName] = useState('');
  const [columns, setColumns] = useState<ColumnDraft[]>([
    { ...blank(), name: 'id', type: 'bigint', primary_key: true, identity: true, nullable: false },
    { ...blank(), name: 'created_at', type: 'timestamptz', default: 'now()', nullable: false },
  ]);
  const [owner, setOwner] = useState(true);
  const [template, setTemplate] = useState('owner_only');
  const [grants, setGrants] = useState<Record<string, string[]>>({ authenticated: ['select', 'insert', 'update', 'delete'] });
  const table = name.trim();
  const all = owner ? [...columns, { ...blank(), name: 'owner', type: 'uuid', default: 'auth.uid()', nullable: false, references: 'auth.users.id' }] : columns;
  const actions: Action[] | null = table
    ? [
        { action: 'create_table', table, columns: all.filter((c) => c.name.trim()).map(columnAction) },
        ...(template !== 'none' && owner ? [{ action: 'policy', table, template, owner_column: 'owner' }] : [{ action: 'enable_rls', table }]),
        ...grantActions(table, grants),
      ]
    : null;
  return (
    <section class="panel" aria-labelledby="new-table-title">
      <h3 id="new-table-title">New table</h3>
      <datalist id="pg-types">
        {TYPES.map((t) => (
          <option value={t} />
        ))}
      </datalist>
      <Field label="Table name" hint="in public: lower-case letters, digits and _">
        <input value={name} spellcheck={false} onInput={(e) => setName(value(e))} />
      </Field>
      {columns.map((c, i) => (
        <ColumnFields c={c} index={i} set={(n) => setColumns(columns.map((x, j) => (j === i ? n : x)))} />
      ))}
      <button type="button" onClick={() => setColumns([...columns, blank()])}>
        Add a column
      </button>
      <label class="check">
        <input type="checkbox" checked={owner} onChange={(e) => setOwner(checked(e))} /> An <code>owner</code> column (uuid, default <code>auth.uid()</code>, references
        auth.users)
      </label>
      <Field label="Row-level security policy">
        <select value={template} disabled={!owner} onChange={(e) => setTemplate(value(e))}>
          {Object.entries(TEMPLATES).map(([k, v]) => (
            <option value={k}>{v}</option>
          ))}
        </select>
      </Field>
      <Grants grants={grants} set={setGrants} />
      <ChangePanel key={JSON.stringify(actions)} actions={actions} title={`create ${table || 'the table'}`} settled={tableListed(table)} onDone={() => onCreated(table)} />
    </section>
  );
}

/** The changes of one table: add, rename or drop a column, RLS with a policy, grants. */
export function TableSchema({ table, onChanged }: { table: TableInfo; onChanged: () => void }) {
  const [kind, setKind] = useState('add_column');
  const [column, setColumn] = useState<ColumnDraft>(blank());
  const [pick, setPick] = useState(table.columns[0]?.name ?? '');
  const [to, setTo] = useState('');
  const [template, setTemplate] = useState('owner_only');
  const [ownerColumn, setOwnerColumn] = useState(table.columns.find((c) => c.type === 'uuid')?.name ?? '');
  const [grants, setGrants] = useState<Record<string, string[]>>(table.grants);
  const t = table.name;
  const before = JSON.stringify(table);
  const changed = async () => {
    const now = (await get<TableInfo[]>('/api/tables')).find((x) => x.name === t);
    return JSON.stringify(now) !== before && (now === undefined || (await restServes(now)));
  };
  let actions: Action[] | null = null;
  if (kind === 'add_column' && column.name.trim()) actions = [{ action: 'add_column', table: t, column: columnAction(column) }];
  if (kind === 'rename_column' && pick && to.trim()) actions = [{ action: 'rename_column', table: t, column: pick, to: to.trim() }];
  if (kind === 'drop_column' && pick) actions = [{ action: 'drop_column', table: t, column: pick }];
  if (kind === 'policy') actions = template === 'none' ? [{ action: 'enable_rls', table: t }] : ownerColumn ? [{ action: 'policy', table: t, template, owner_column: ownerColumn }] : null;
  if (kind === 'grant') actions = grantActions(t, grants).length ? grantActions(t, grants) : null;
  const columnPicker = (
    <Field label="Column">
      <select value={pick} onChange={(e) => setPick(value(e))}>
        {table.columns.map((c) => (
          <option value={c.name}>{c.name}</option>
        ))}
      </select>
    </Field>
  );
  return (
    <section class="panel" aria-labelledby="schema-title">
      <h4 id="schema-title">Change the schema</h4>
      <Field label="Change">
        <select value={kind} onChange={(e) => setKind(value(e))}>
          <option value="add_column">Add a column</option>
          <option value="rename_column">Rename a column</option>
          <option value="drop_column">Drop a column</option>
          <option value="policy">Row-level security and a policy</option>
          <option value="grant">Grant to the API roles</option>
        </select>
      </Field>
      {kind === 'add_column' && <ColumnFields c={column} index={table.columns.length} set={setColumn} />}
      {kind === 'rename_column' && (
        <div class="inline">
          {columnPicker}
          <Field label="New name">
            <input value={to} spellcheck={false} onInput={(e) => setTo(value(e))} />
          </Field>
        </div>
      )}
      {kind === 'drop_column' && columnPicker}
      {kind === 'policy' && (
        <div class="inline">
          <Field label="Policy template">
            <select value={template} onChange={(e) => setTemplate(value(e))}>
              {Object.entries(TEMPLATES).map(([k, v]) => (
                <option value={k}>{k === 'none' ? 'Row-level security on, no policy' : v}</option>
              ))}
            </select>
          </Field>
          <Field label="Owner column" hint="holds the user's id (uuid)">
            <input value={ownerColumn} spellcheck={false} onInput={(e) => setOwnerColumn(value(e))} />
          </Field>
        </div>
      )}
      {kind === 'grant' && <Grants grants={grants} set={setGrants} />}
      <ChangePanel key={JSON.stringify(actions)} actions={actions} title={`${kind.replace('_', ' ')} on ${t}`} settled={changed} onDone={onChanged} />
    </section>
  );
}
