/** Settings: this instance's configuration, read-only and without secrets. */
import { DataTable } from '../ui.tsx';

export interface Settings {
  version: string;
  node: string;
  development_mode: boolean;
  schema_changes: string;
  anon_key: string;
  site_url: string;
  api_external_url: string;
  allowed_origins: string;
  features: Record<string, unknown> & { sql_endpoint: boolean };
  back_ends: Record<string, unknown>;
  limits: Record<string, unknown>;
  migrations: { plinth: { name: string; applied_at: string }[]; app: { name: string; applied_at: string }[] };
}

const rows = (o: Record<string, unknown>) => Object.entries(o).map(([setting, value]) => ({ setting, value: Array.isArray(value) ? value.join(', ') || 'none' : value }));

export function SettingsView({ settings }: { settings: Settings | null }) {
  if (!settings) return <p>Loading…</p>;
  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      <p>Read-only: these come from the service's environment. No secret is shown.</p>
      <DataTable
        caption="Service"
        rows={rows({
          version: settings.version,
          node: settings.node,
          'development mode': settings.development_mode,
          'schema changes go to': settings.schema_changes,
          SITE_URL: settings.site_url,
          API_EXTERNAL_URL: settings.api_external_url,
          'allowed origins': settings.allowed_origins,
        })}
      />
      <DataTable caption="Features" rows={rows(settings.features)} />
      <DataTable caption="Back ends" rows={rows(settings.back_ends)} />
      <DataTable caption="Limits" rows={rows(settings.limits)} />
      <h3>Migrations</h3>
      {settings.migrations.app.length === 0 ? (
        <p class="empty">None of yours yet: work in progress is migrations/current.sql; npm run db:commit makes it a migration.</p>
      ) : (
        <DataTable caption="Your migrations" rows={settings.migrations.app} />
      )}
      <details>
        <summary>plinth's own migrations ({settings.migrations.plinth.length}, the newest {settings.migrations.plinth.at(-1)?.name ?? 'none'})</summary>
        <DataTable caption="plinth's migrations" rows={settings.migrations.plinth} />
      </details>
    </section>
  );
}
