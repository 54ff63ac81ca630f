/**
 * The databases the developer loop needs: DATABASE_URL (or the embedded PostgreSQL under
 * DATA_DIR, started here or reused when `npm run dev` already runs it), plus graphile-migrate's
 * SHADOW_DATABASE_URL (`<db>_shadow`) and ROOT_DATABASE_URL (the `postgres` database).
 */
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { parseConfig } from '../core/config.ts';
import pino from 'pino';

export interface DevDatabases {
  url: string;
  shadowUrl: string;
  rootUrl: string;
  stop(): Promise<void>;
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function devDatabases(): Promise<DevDatabases> {
  if (!process.env.DATABASE_URL) {
    // As npm start does: as root in a folder the postgres user cannot enter, the data lives elsewhere.
    const moved = (await import('../host/embedded.ts')).rootDataDir(process.env);
    if (moved) process.env.DATA_DIR = moved;
  }
  const config = parseConfig(process.env);
  let url = config.databaseUrl;
  let stop = async () => {};
  if (url === null) {
    const state = join(config.dataDir, 'postgres.json');
    const stored = existsSync(state) ? (JSON.parse(readFileSync(state, 'utf8')) as { password: string; port: number }) : null;
    if (stored && existsSync(join(config.dataDir, 'postgres', 'postmaster.pid')) && (await answers(stored.port))) {
      url = `postgres://postgres:${encodeURIComponent(stored.password)}@127.0.0.1:${stored.port}/plinth`;
    } else {
      const { startEmbedded } = await import('../host/embedded.ts');
      // Its lines go to stderr: stdout is the command's own output (`npm run -s gen:types > types.ts`).
      const embedded = await startEmbedded(config.dataDir, pino({ level: config.logLevel, base: undefined }, pino.destination(2)));
      url = embedded.url;
      stop = () => embedded.stop();
    }
  }
  const db = new URL(url).pathname.slice(1) || 'postgres';
  return {
    url,
    shadowUrl: config.shadowDatabaseUrl ?? withDatabase(url, `${db}_shadow`),
    rootUrl: config.rootDatabaseUrl ?? withDatabase(url, 'postgres'),
    stop,
  };
}
