/**
 * Is a DATABASE_URL the embedded PostgreSQL of DATA_DIR? `npm run dev` starts (or reuses) the
 * embedded database and hands its URL to the service it restarts: that service then knows the
 * database is the embedded one (its banner, the dashboard's Settings) from the state the
 * embedded start keeps in DATA_DIR/postgres.json (its password and port).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export function isEmbeddedUrl(url: string | null, dataDir: string): boolean {
  if (url === null) return false;
  const state = join(dataDir, 'postgres.json');
  try {
    if (!existsSync(state)) return false;
    const stored = JSON.parse(readFileSync(state, 'utf8')) as { password?: unknown; port?: unknown };
    const u = new URL(url);
    return (
      u.hostname === '127.0.0.1' &&
      Number(u.port) === stored.port &&
      decodeURIComponent(u.username) === 'postgres' &&
      decodeURIComponent(u.password) === stored.password
    );
  } catch {
    return false;
  }
}
