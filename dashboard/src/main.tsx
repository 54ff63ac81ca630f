/**
 * The plinth dashboard: a single page over plinth's documented HTTP endpoints, for the people
 * who run it. Sign-in with a service_role account (and its second factor when it has one,
 * mfa.tsx) or the service-role key; the first admin
 * comes from the one-time setup link that `npm start` prints. Views are addressed by the
 * hash (#/tables, #/users …) so a reload keeps the place.
 */
import './style.css';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { call, currentSession, errorText, get, onSession, setSession } from './api.ts';
import { ErrorLine, Field, Icon, useAction } from './ui.tsx';
import { EnrolOffer, SecondFactor, startAccountSession, verifiedFactor, type Pending, type TokenAnswer } from './mfa.tsx';
import { TablesView } from './views/tables.tsx';
import { SqlView } from './views/sql.tsx';
import { UsersView } from './views/users.tsx';
import { StorageView } from './views/storage.tsx';
import { WebhooksView } from './views/webhooks.tsx';
import { FunctionsView } from './views/functions.tsx';
import { LiveView } from './views/live.tsx';
import { LogsView } from './views/logs.tsx';
import { SchedulesView } from './views/schedules.tsx';
import { BackupsView } from './views/backups.tsx';
import { SettingsView, type Settings } from './views/settings.tsx';

const VIEWS = ['tables', 'sql', 'users', 'storage', 'webhooks', 'functions', 'live', 'schedules', 'backups', 'logs', 'settings'] as const;
type View = (typeof VIEWS)[number];
const TITLES: Record<View, string> = {
  tables: 'Tables',
  sql: 'SQL',
  users: 'Users',
  storage: 'Storage',
  webhooks: 'Webhooks',
  functions: 'Functions',
  live: 'Live',
  schedules: 'Schedules',
  backups: 'Backups',
  logs: 'Logs',
  settings: 'Settings',
};

function route(): { view: string; params: URLSearchParams } {
  const [path, query] = location.hash.replace(/^#\/?/, '').split('?');
  return { view: path || 'tables', params: new URLSearchParams(query ?? '') };
}

function useRoute() {
  const [r, setR] = useState(route());
  useEffect(() => {
    const on = () => setR(route());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return r;
}

function useSession() {
  const [s, setS] = useState(currentSession());
  useEffect(() => onSession(() => setS(currentSession())), []);
  return s;
}

/** A password sign-in: the session, or the second step when the account has a verified factor. */
async function signInWithPassword(email: string, password: string): Promise<Pending | null> {
  const r = await call<TokenAnswer>('POST', '/auth/v1/token?grant_type=password', { body: { grant_type: 'password', email, password }, token: null });
  if (r.data.user.role !== 'service_role') {
    throw new Error(`This account's role is ${r.data.user.role}: only service_role accounts can open the dashboard.`);
  }
  const factorId = await verifiedFactor(r.data.access_token);
  if (factorId !== null) return { token: r.data.access_token, email: r.data.user.email ?? email, factorId };
  startAccountSession(r.data, email);
  return null;
}

function SignIn() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [key, setKey] = useState('');
  const [pending, setPending] = useState<Pending | null>(null);
  const action = useAction();
  if (pending) return <SecondFactor pending={pending} onCancel={() => setPending(null)} />;
  return (
    <main class="signin">
      <h1>plinth</h1>
      <form
        aria-labelledby="signin-title"
        onSubmit={(e) => {
          e.preventDefault();
          void action.run(async () => setPending(await signInWithPassword(email, password)));
        }}
      >
        <h2 id="signin-title">Sign in</h2>
        <Field label="Email">
          <input type="email" autocomplete="username" required value={email} onInput={(e) => setEmail((e.target as HTMLInputElement).value)} />
        </Field>
        <Field label="Password">
          <input type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword((e.target as HTMLInputElement).value)} />
        </Field>
        <button type="submit" disabled={action.busy}>
          Sign in
        </button>
      </form>
      <form
        aria-labelledby="key-title"
        onSubmit={(e) => {
          e.preventDefault();
          void action.run(async () => {
            const r = await fetch('/api/settings', { headers: { authorization: `Bearer ${key.trim()}` } });
            if (!r.ok) throw new Error(r.status === 403 ? 'This is not the service-role key.' : `The key was refused (${r.status}).`);
            setSession({ token: key.trim(), kind: 'key' });
          });
        }}
      >
        <h2 id="key-title">Or paste the service-role key</h2>
        <Field label="Service-role key">
          <input type="password" autocomplete="off" required value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)} />
        </Field>
        <button type="submit" disabled={action.busy}>
          Use the key
        </button>
      </form>
      <ErrorLine error={action.error} />
    </main>
  );
}

function Setup({ token }: { token: string }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const action = useAction();
  return (
    <main class="signin">
      <h1>plinth</h1>
      <form
        aria-labelledby="setup-title"
        onSubmit={(e) => {
          e.preventDefault();
          void action.run(async () => {
            await call('POST', '/api/dashboard/setup', { body: { token, email, password }, token: null });
            await signInWithPassword(email, password);
            location.hash = '#/tables';
          });
        }}
      >
        <h2 id="setup-title">Create the first admin</h2>
        <p>This link works once, within an hour of the start that printed it. The account gets the service_role role.</p>
        <Field label="Email">
          <input type="email" autocomplete="username" required value={email} onInput={(e) => setEmail((e.target as HTMLInputElement).value)} />
        </Field>
        <Field label="Password" hint="at least 8 characters">
          <input type="password" autocomplete="new-password" required minLength={8} value={password} onInput={(e) => setPassword((e.target as HTMLInputElement).value)} />
        </Field>
        <button type="submit" disabled={action.busy}>
          Create admin and sign in
        </button>
      </form>
      <ErrorLine error={action.error} />
    </main>
  );
}

function Shell({ view }: { view: View }) {
  const session = currentSession();
  const [settings, setSettings] = useState<Settings | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    get<Settings>('/api/settings').then(setSettings, setError);
  }, []);
  useEffect(() => {
    document.title = `${TITLES[view]} · plinth dashboard`;
  }, [view]);
  return (
    <>
      <header>
        <a class="brand" href="#/tables">
          plinth
        </a>
        <nav aria-label="Views">
          {VIEWS.map((v) => (
            <a href={`#/${v}`} aria-current={v === view ? 'page' : undefined}>
              <Icon name={v} />
              <span>{TITLES[v]}</span>
            </a>
          ))}
        </nav>
        <span class="who">{session?.kind === 'key' ? 'service-role key' : session?.email}</span>
        <button type="button" onClick={() => setSession(null)}>
          Sign out
        </button>
      </header>
      <main>
        <EnrolOffer />
        {error ? <p class="error">{errorText(error)}</p> : null}
        {view === 'tables' && <TablesView />}
        {view === 'sql' && <SqlView settings={settings} />}
        {view === 'users' && <UsersView />}
        {view === 'storage' && <StorageView />}
        {view === 'webhooks' && <WebhooksView />}
        {view === 'functions' && <FunctionsView settings={settings} />}
        {view === 'live' && <LiveView />}
        {view === 'schedules' && <SchedulesView />}
        {view === 'backups' && <BackupsView />}
        {view === 'logs' && <LogsView />}
        {view === 'settings' && <SettingsView settings={settings} />}
      </main>
    </>
  );
}

function App() {
  const r = useRoute();
  const session = useSession();
  if (r.view === 'setup' && r.params.get('token')) return <Setup token={r.params.get('token')!} />;
  if (!session) return <SignIn />;
  const view = (VIEWS as readonly string[]).includes(r.view) ? (r.view as View) : 'tables';
  return <Shell view={view} />;
}

const root = document.getElementById('app')!;
root.textContent = '';
render(<App />, root);
