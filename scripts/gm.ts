/**
 * `npm run db:commit | db:uncommit | db:reset`: graphile-migrate with the developer
 * databases in its environment (starting the embedded PostgreSQL when needed).
 */
import { spawn } from 'node:child_process';
import { devDatabases } from './dev-env.ts';

const dbs = await devDatabases();
const child = spawn('graphile-migrate', process.argv.slice(2), {
  stdio: 'inherit',
  env: { ...process.env, DATABASE_URL: dbs.url, SHADOW_DATABASE_URL: dbs.shadowUrl, ROOT_DATABASE_URL: dbs.rootUrl },
});
const code: number = await new Promise((resolve) => child.on('close', (c) => resolve(c ?? 1)));
await dbs.stop();
process.exit(code);
