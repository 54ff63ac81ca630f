/**
 * `plinth keys`: the anon and service-role keys, derived from JWT_SECRET (or, without it,
 * the development secret kept under DATA_DIR) exactly as the service derives them at start
 * (src/core/config.ts, resolveSecrets): the same secret and data folder print the same keys.
 */
import { loadConfig } from '../core/config.ts';

export async function keysText(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const config = await loadConfig(env);
  return `ANON_KEY=${config.anonKey}\nSERVICE_ROLE_KEY=${config.serviceRoleKey}\n`;
}
