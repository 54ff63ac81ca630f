/**
 * Making secrets: the JWT secret (generated once under DATA_DIR in development mode) and the
 * anon / service-role keys (derived from it, or given explicitly and verified). Reading the
 * settings is `parseConfig`'s (config.ts); `resolveSecrets` there settles a parsed config
 * through `makeSecrets`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT, jwtVerify } from 'jose';
import { ConfigError } from './config/read.ts';

/** The settings the secrets are made from. */
export interface SecretSettings {
  jwtSecret: string | null;
  anonKeyEnv: string | null;
  serviceRoleKeyEnv: string | null;
  dataDir: string;
}

/** The settled secrets, added to the config. */
export interface Secrets {
  secret: string;
  /** true when JWT_SECRET was unset (development mode: no credential = anon). */
  devMode: boolean;
  anonKey: string;
  serviceRoleKey: string;
  /** true when SERVICE_ROLE_KEY was set explicitly (mounts /api/demo, docs/api/overview.md). */
  serviceRoleKeyExplicit: boolean;
}

interface StoredSecret {
  secret: string;
  created_at: number;
}

/** Reads or creates a JSON file under DATA_DIR, mode 0600. */
function readOrCreate<T>(file: string, create: () => T): T {
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as T;
  // 0711: others may pass through (the embedded PostgreSQL's postgres user, as root) but not list; the files are 0600.
  mkdirSync(join(file, '..'), { recursive: true, mode: 0o711 });
  const value = create();
  writeFileSync(file, JSON.stringify(value, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
  return value;
}

const TEN_YEARS = 10 * 365 * 24 * 3600;

async function deriveKey(secret: string, role: 'anon' | 'service_role', iat: number): Promise<string> {
  return new SignJWT({ role })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuedAt(iat)
    .setExpirationTime(iat + TEN_YEARS)
    .sign(new TextEncoder().encode(secret));
}

async function checkKey(secret: string, name: string, token: string, role: string): Promise<void> {
  try {
    const { payload } = await jwtVerify(token, new TextEncoder().encode(secret), { algorithms: ['HS256'] });
    if (payload.role !== role) throw new Error('role');
  } catch {
    throw new ConfigError(name, `must be a JWT signed with JWT_SECRET whose role is ${role}`);
  }
}

/** The secret and its creation time: generated and kept in development mode, remembered per data directory otherwise. */
function settleSecret(config: SecretSettings): { secret: string; createdAt: number } {
  if (config.jwtSecret === null) {
    if (config.anonKeyEnv !== null) throw new ConfigError('ANON_KEY', 'is set without JWT_SECRET');
    if (config.serviceRoleKeyEnv !== null) throw new ConfigError('SERVICE_ROLE_KEY', 'is set without JWT_SECRET');
    const stored = readOrCreate<StoredSecret>(join(config.dataDir, 'jwt-secret.json'), () => ({
      secret: randomBytes(48).toString('base64url'),
      created_at: Math.floor(Date.now() / 1000),
    }));
    return { secret: stored.secret, createdAt: stored.created_at };
  }
  const secret = config.jwtSecret;
  // A given secret has no creation time of its own: remember when this data directory
  // first saw it, so the derived keys stay the same from start to start.
  const fingerprint = createHash('sha256').update(secret).digest('hex').slice(0, 16);
  const file = join(config.dataDir, `keys-${fingerprint}.json`);
  try {
    return { secret, createdAt: readOrCreate(file, () => ({ created_at: Math.floor(Date.now() / 1000) })).created_at };
  } catch {
    return { secret, createdAt: 1767225600 }; // DATA_DIR not writable: a fixed epoch (2026-01-01) still gives stable keys
  }
}

/**
 * Settle the secret and keys. Development mode (no JWT_SECRET): a random secret is
 * generated once and kept in DATA_DIR/jwt-secret.json. Derived keys use the secret's
 * creation time as `iat`, so every start prints the same keys.
 */
export async function makeSecrets(config: SecretSettings): Promise<Secrets> {
  const { secret, createdAt } = settleSecret(config);
  if (config.anonKeyEnv !== null) await checkKey(secret, 'ANON_KEY', config.anonKeyEnv, 'anon');
  if (config.serviceRoleKeyEnv !== null) await checkKey(secret, 'SERVICE_ROLE_KEY', config.serviceRoleKeyEnv, 'service_role');
  return {
    secret,
    devMode: config.jwtSecret === null,
    anonKey: config.anonKeyEnv ?? (await deriveKey(secret, 'anon', createdAt)),
    serviceRoleKey: config.serviceRoleKeyEnv ?? (await deriveKey(secret, 'service_role', createdAt)),
    serviceRoleKeyExplicit: config.serviceRoleKeyEnv !== null,
  };
}
