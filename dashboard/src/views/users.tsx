/** Users: the accounts (search and pages in the page), create one, edit one (email, password, role, confirmation, metadata, ban), delete one. */
import { useState } from 'preact/hooks';
import { call, get } from '../api.ts';
import { DataTable, ErrorLine, Field, useAction, useLoad } from '../ui.tsx';

interface User {
  id: string;
  email: string | null;
  role: string;
  created_at: string;
}
const PAGE = 25;

export function UsersView() {
  const users = useLoad(() => get<User[]>('/auth/v1/admin/users'));
  const [search, setSearch] = useState('');
  const [page, setPage] = useState(0);
  const [form, setForm] = useState({ email: '', password: '', role: 'authenticated', confirmed: true });
  const [armed, setArmed] = useState<string | null>(null);
  const [sessionsOf, setSessionsOf] = useState<User | null>(null);
  const [editing, setEditing] = useState<User | null>(null);
  const action = useAction();
  const found = (users.data ?? []).filter((u) => (u.email ?? '').toLowerCase().includes(search.toLowerCase()) || u.id.startsWith(search));
  const shown = found.slice(page * PAGE, page * PAGE + PAGE);
  return (
    <section aria-labelledby="users-title">
      <h2 id="users-title">Users</h2>
      <form
        class="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void action.run(async () => {
            await call('POST', '/auth/v1/admin/users', {
              body: { email: form.email, ...(form.password ? { password: form.password } : {}), role: form.role, email_confirm: form.confirmed },
            });
            setForm({ ...form, email: '', password: '' });
            users.reload();
          });
        }}
      >
        <Field label="Email">
          <input type="email" required value={form.email} onInput={(e) => setForm({ ...form, email: (e.target as HTMLInputElement).value })} />
        </Field>
        <Field label="Password (optional)">
          <input type="password" autocomplete="new-password" value={form.password} onInput={(e) => setForm({ ...form, password: (e.target as HTMLInputElement).value })} />
        </Field>
        <Field label="Role">
          <select value={form.role} onChange={(e) => setForm({ ...form, role: (e.target as HTMLSelectElement).value })}>
            <option value="authenticated">authenticated</option>
            <option value="service_role">service_role (dashboard admin)</option>
            <option value="anon">anon</option>
          </select>
        </Field>
        <label class="check">
          <input type="checkbox" checked={form.confirmed} onChange={(e) => setForm({ ...form, confirmed: (e.target as HTMLInputElement).checked })} /> address confirmed
        </label>
        <button type="submit" disabled={action.busy}>
          Create user
        </button>
      </form>
      <ErrorLine error={action.error} />
      <ErrorLine error={users.error} />
      <Field label="Search by email or id">
        <input
          type="search"
          value={search}
          onInput={(e) => {
            setSearch((e.target as HTMLInputElement).value);
            setPage(0);
          }}
        />
      </Field>
      <DataTable
        caption={`Users (${found.length})`}
        rows={shown as unknown as Record<string, unknown>[]}
        columns={['email', 'role', 'created_at', 'id']}
        actions={(u) => (
          <>
            <button type="button" onClick={() => setEditing(u as unknown as User)} aria-label={`Edit ${String(u.email ?? u.id)}`}>
              Edit
            </button>{' '}
            <button type="button" onClick={() => setSessionsOf(u as unknown as User)} aria-label={`Sessions of ${String(u.email ?? u.id)}`}>
              Sessions
            </button>{' '}
            <button
              type="button"
              onClick={() => void action.run(() => call('PUT', `/auth/v1/admin/users/${u.id as string}`, { body: { email_confirm: true } }))}
              aria-label={`Confirm the address of ${String(u.email ?? u.id)}`}
            >
              Confirm
            </button>{' '}
            {armed === u.id ? (
            <button
              type="button"
              class="danger"
              onClick={() =>
                void action.run(async () => {
                  await call('DELETE', `/auth/v1/admin/users/${u.id as string}`);
                  setArmed(null);
                  users.reload();
                })
              }
            >
              Really delete {String(u.email ?? u.id)}
            </button>
          ) : (
            <button type="button" onClick={() => setArmed(u.id as string)} aria-label={`Delete ${String(u.email ?? u.id)}`}>
              Delete
            </button>
          )}
          </>
        )}
      />
      <div class="pager">
        <button type="button" disabled={page === 0} onClick={() => setPage(page - 1)}>
          Previous
        </button>
        <button type="button" disabled={(page + 1) * PAGE >= found.length} onClick={() => setPage(page + 1)}>
          Next
        </button>
      </div>
      {editing && (
        <EditUser
          key={editing.id}
          user={editing}
          onSaved={() => {
            setEditing(null);
            users.reload();
          }}
        />
      )}
      {sessionsOf && <Sessions key={sessionsOf.id} user={sessionsOf} />}
    </section>
  );
}

interface SessionRow {
  id: string;
  created_at: string;
  refreshed_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
  revoked_reason: string | null;
}

function Sessions({ user }: { user: User }) {
  const sessions = useLoad(() => get<SessionRow[]>(`/auth/v1/admin/users/${user.id}/sessions`), [user.id]);
  const action = useAction();
  return (
    <div>
      <h3>Sessions of {user.email ?? user.id}</h3>
      <ErrorLine error={sessions.error} />
      <ErrorLine error={action.error} />
      {sessions.data && (
        <DataTable
          caption="Sessions (refresh-token families), newest first"
          rows={sessions.data as unknown as Record<string, unknown>[]}
          actions={(s) =>
            s.revoked_at === null ? (
              <button
                type="button"
                class="danger"
                onClick={() =>
                  void action.run(async () => {
                    await call('DELETE', `/auth/v1/admin/users/${user.id}/sessions/${s.id as string}`);
                    sessions.reload();
                  })
                }
                aria-label={`Revoke session ${s.id as string}`}
              >
                Revoke
              </button>
            ) : (
              'ended'
            )
          }
        />
      )}
    </div>
  );
}

interface AdminUser extends User {
  user_metadata: Record<string, unknown>;
  app_metadata: Record<string, unknown>;
  email_confirmed_at: string | null;
  banned_until: string | null;
}

/** The keys of `app_metadata` plinth sets itself: shown, not edited. */
const OWN_KEYS = ['provider', 'providers'];

function withoutOwnKeys(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([k]) => !OWN_KEYS.includes(k)));
}

/** PUT merges metadata: a key the admin removed from the text is sent as null, which removes it. */
function changes(before: Record<string, unknown>, text: string, label: string): Record<string, unknown> {
  let after: unknown;
  try {
    after = JSON.parse(text || '{}');
  } catch {
    throw new Error(`${label} is not JSON`);
  }
  if (typeof after !== 'object' || after === null || Array.isArray(after)) throw new Error(`${label} must be a JSON object`);
  const removed = Object.keys(before).filter((k) => !(k in after) && !OWN_KEYS.includes(k));
  return { ...(after as Record<string, unknown>), ...Object.fromEntries(removed.map((k) => [k, null])) };
}

function EditUser({ user, onSaved }: { user: User; onSaved: () => void }) {
  const loaded = useLoad(() => get<AdminUser>(`/auth/v1/admin/users/${user.id}`), [user.id]);
  const action = useAction();
  const [form, setForm] = useState<{ email: string; password: string; role: string; confirmed: boolean; user: string; app: string; ban: string } | null>(null);
  const u = loaded.data;
  if (u && form === null) {
    setForm({
      email: u.email ?? '',
      password: '',
      role: u.role,
      confirmed: u.email_confirmed_at !== null,
      user: JSON.stringify(u.user_metadata, null, 2),
      app: JSON.stringify(withoutOwnKeys(u.app_metadata), null, 2),
      ban: '',
    });
  }
  const set = (k: string) => (e: Event) => setForm({ ...form!, [k]: (e.target as HTMLInputElement).value });
  return (
    <div>
      <h3>Edit {user.email ?? user.id}</h3>
      <ErrorLine error={loaded.error} />
      <ErrorLine error={action.error} />
      {u && form && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void action.run(async () => {
              const body: Record<string, unknown> = {
                role: form.role,
                email_confirm: form.confirmed,
                user_metadata: changes(u.user_metadata, form.user, 'user_metadata'),
                app_metadata: changes(u.app_metadata, form.app, 'app_metadata'),
              };
              if (form.email !== (u.email ?? '')) body.email = form.email;
              if (form.password) body.password = form.password;
              if (form.ban) body.ban_duration = form.ban;
              await call('PUT', `/auth/v1/admin/users/${user.id}`, { body });
              onSaved();
            });
          }}
        >
          <Field label="Email of the user">
            <input type="email" value={form.email} onInput={set('email')} />
          </Field>
          <Field label="New password (optional)">
            <input type="password" autocomplete="new-password" value={form.password} onInput={set('password')} />
          </Field>
          <Field label="Role of the user">
            <select value={form.role} onChange={set('role')}>
              {['authenticated', 'service_role', 'anon'].includes(form.role) ? null : <option value={form.role}>{form.role}</option>}
              <option value="authenticated">authenticated</option>
              <option value="service_role">service_role (dashboard admin)</option>
              <option value="anon">anon</option>
            </select>
          </Field>
          <label class="check">
            <input type="checkbox" checked={form.confirmed} onChange={(e) => setForm({ ...form, confirmed: (e.target as HTMLInputElement).checked })} />{' '}
            address confirmed
          </label>
          <Field label="user_metadata (JSON)">
            <textarea rows={4} value={form.user} onInput={set('user')} />
          </Field>
          <Field label="app_metadata (JSON)" hint={`plinth sets provider (${String(u.app_metadata.provider)}) and providers itself`}>
            <textarea rows={4} value={form.app} onInput={set('app')} />
          </Field>
          <Field label="Ban" hint={u.banned_until ? `banned until ${u.banned_until}` : 'not banned'}>
            <select value={form.ban} onChange={set('ban')}>
              <option value="">{u.banned_until ? 'keep the ban' : 'no ban'}</option>
              <option value="1h">ban for 1 hour</option>
              <option value="24h">ban for 24 hours</option>
              <option value="720h">ban for 30 days</option>
              <option value="876000h">ban for good (100 years)</option>
              {u.banned_until && <option value="none">lift the ban</option>}
            </select>
          </Field>
          <button type="submit" disabled={action.busy}>
            Save user
          </button>
        </form>
      )}
    </div>
  );
}
