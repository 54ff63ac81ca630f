/**
 * `npm run keys`: the anon and service-role keys this installation's service uses, on stdout
 * for an operator's terminal (never the service's log, where a start with JWT_SECRET set
 * prints fingerprints only). Derived as the start derives them (src/core/config.ts): from
 * JWT_SECRET, or in development mode from the secret generated under DATA_DIR; given
 * ANON_KEY / SERVICE_ROLE_KEY are printed as given. In the container:
 * `docker compose exec plinth npm run keys`.
 */
import { ConfigError, loadConfig } from './core/config.ts';

// As npm start does: as root in a folder the postgres user cannot enter, the data lives elsewhere.
if (!process.env.DATABASE_URL) {
  const moved = (await import('./host/embedded.ts')).rootDataDir(process.env);
  if (moved) process.env.DATA_DIR = moved;
}
try {
  const config = await loadConfig(process.env);
  process.stdout.write(`ANON_KEY=${config.anonKey}\nSERVICE_ROLE_KEY=${config.serviceRoleKey}\n`);
  process.stderr.write(
    config.devMode
      ? `(development mode: derived from the generated secret in ${config.dataDir}/jwt-secret.json)\n`
      : `(derived from JWT_SECRET${config.serviceRoleKeyExplicit ? '; SERVICE_ROLE_KEY as given' : ''}: the service-role key bypasses every policy, keep it on servers)\n`,
  );
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(err.message + '\n');
    process.exit(1);
  }
  throw err;
}
