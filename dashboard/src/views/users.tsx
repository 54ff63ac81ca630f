/** Users: the accounts (search and pages in the page), create one, delete one. */
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
