import t from 'tap';
import { spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SignJWT, decodeJwt } from 'jose';
import { loadConfig, parseConfig } from '../../src/core/config.ts';
import { TEST_JWT_SECRET } from '../helpers/app.ts';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));

function tmp(t: { teardown(fn: () => void): void }): string {
  const d = mkdtempSync(join(tmpdir(), 'plinth-config-'));
  t.teardown(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

t.test('defaults follow contract §2', async (t) => {
  const c = parseConfig({});
  t.equal(c.siteUrl, 'http://localhost:3000');
  t.equal(c.jwtSecret, null);
  t.equal(c.anonymousRole, 'anonymous');
  t.equal(c.authRateLimit, 30);
  t.equal(c.anonymousRateLimit, 30);
  t.equal(c.maxBatchOperations, 20);
  t.equal(c.storageBackend, 'database');
  t.equal(c.host, '127.0.0.1');
  t.equal(c.port, 8000);
  t.equal(c.migrateOnStart, true);
  t.equal(c.accessTokenTtl, 3600);
  t.equal(c.refreshTokenTtl, 2592000);
  t.equal(c.apiExternalUrl, 'http://127.0.0.1:8000');
  t.equal(c.mailFrom, 'noreply@localhost');
  t.equal(c.webhookTimeoutMs, 10000);
  t.equal(c.wsMaxConnections, 10000);
  t.equal(c.wsMaxConnectionsPerIp, 100);
  t.equal(c.wsPingInterval, 30);
  t.equal(c.liveChannel, 'lqs');
  t.equal(c.dbPoolSize, 10);
  t.equal(c.maxBodyBytes, 1048576);
  t.equal(c.maxJsonDepth, 128);
  t.equal(c.mfaEncryptionKey, null);
  t.equal(c.authHookCustomAccessToken, null);
  t.equal(c.authAuditRetentionDays, 90);
  t.equal(c.shutdownTimeoutMs, 10000);
  t.same(c.allowedOrigins, []);
  t.same(c.oauth, {});
  t.ok(Object.isFrozen(c), 'frozen');
  t.equal(parseConfig({ HOST: '0.0.0.0', PORT: '9000' }).apiExternalUrl, 'http://localhost:9000', 'API_EXTERNAL_URL uses localhost for a wildcard HOST');
});

t.test('invalid values name the variable', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ JWT_SECRET: 'short' }, 'JWT_SECRET'],
    [{ REQUIRE_EMAIL_VERIFICATION: 'yes' }, 'REQUIRE_EMAIL_VERIFICATION'],
    [{ ALLOW_ANONYMOUS_SIGNIN: 'TRUE' }, 'ALLOW_ANONYMOUS_SIGNIN'],
    [{ SITE_URL: 'not a url' }, 'SITE_URL'],
    [{ STORAGE_BACKEND: 's3' }, 'STORAGE_BACKEND'],
    [{ ANONYMOUS_ROLE: 'anon' }, 'ANONYMOUS_ROLE'],
    [{ ANONYMOUS_ROLE: 'Guest' }, 'ANONYMOUS_ROLE'],
    [{ AUTH_RATE_LIMIT: '-1' }, 'AUTH_RATE_LIMIT'],
    [{ MAX_BATCH_OPERATIONS: '0' }, 'MAX_BATCH_OPERATIONS'],
    [{ PORT: '70000' }, 'PORT'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ ALLOWED_ORIGINS: 'http://a.test/path' }, 'ALLOWED_ORIGINS'],
    [{ SMTP_URL: 'http://mail' }, 'SMTP_URL'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ MAX_JSON_DEPTH: '0' }, 'MAX_JSON_DEPTH'],
    [{ MAX_JSON_DEPTH: '5000' }, 'MAX_JSON_DEPTH'],
    [{ SHUTDOWN_TIMEOUT_MS: '10s' }, 'SHUTDOWN_TIMEOUT_MS'],
    [{ WS_PING_INTERVAL: '0' }, 'WS_PING_INTERVAL'],
    [{ GOOGLE_TOKEN_URL: 'http://example.com/token' }, 'GOOGLE_TOKEN_URL'],
    [{ MFA_ENCRYPTION_KEY: 'too short' }, 'MFA_ENCRYPTION_KEY'],
    [{ AUTH_HOOK_CUSTOM_ACCESS_TOKEN: 'no_schema' }, 'AUTH_HOOK_CUSTOM_ACCESS_TOKEN'],
    [{ AUTH_HOOK_CUSTOM_ACCESS_TOKEN: 'public.hook(); drop table x' }, 'AUTH_HOOK_CUSTOM_ACCESS_TOKEN'],
    [{ AUTH_AUDIT_RETENTION_DAYS: '-1' }, 'AUTH_AUDIT_RETENTION_DAYS'],
  ];
  for (const [env, name] of cases) {
    t.throws(() => parseConfig(env), { message: new RegExp(name) }, `${JSON.stringify(env)} → ${name}`);
  }
  t.doesNotThrow(() => parseConfig({ GOOGLE_TOKEN_URL: 'http://127.0.0.1:9/token' }), 'http:// is fine for loopback providers');
  const apple = { APPLE_CLIENT_ID: 'c', APPLE_TEAM_ID: 't', APPLE_KEY_ID: 'k' };
  const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  t.equal(parseConfig({ ...apple, APPLE_PRIVATE_KEY: p256 }).oauth.apple?.clientId, 'c', 'apple with a P-256 key');
  t.equal(parseConfig({ ...apple, APPLE_PRIVATE_KEY: p256.replace(/\n/g, '\\n') }).oauth.apple?.privateKey, p256, 'escaped newlines are accepted');
  t.throws(() => parseConfig({ ...apple, APPLE_PRIVATE_KEY: p384 }), { message: /APPLE_PRIVATE_KEY/ }, 'another curve');
  t.throws(() => parseConfig({ ...apple, APPLE_PRIVATE_KEY: '-----BEGIN PRIVATE KEY-----\nxx\n-----END PRIVATE KEY-----' }), { message: /APPLE_PRIVATE_KEY/ }, 'not a key');
  t.same(Object.keys(parseConfig({ ...apple }).oauth), [], 'a provider needs all its variables');
  t.same(parseConfig({ ALLOWED_ORIGINS: 'https://a.test, http://b.test:8080' }).allowedOrigins, ['https://a.test', 'http://b.test:8080']);
});

t.test('development mode: a secret is generated once and the keys stay the same', async (t) => {
  const dir = tmp(t);
  const a = await loadConfig({ DATA_DIR: dir });
  const b = await loadConfig({ DATA_DIR: dir });
  t.equal(a.devMode, true);
  t.ok(a.secret.length >= 32);
  t.equal(a.secret, b.secret, 'secret kept under DATA_DIR');
  t.equal(a.anonKey, b.anonKey, 'same anon key on every start');
  t.equal(a.serviceRoleKey, b.serviceRoleKey);
  const claims = decodeJwt(a.anonKey);
  t.equal(claims.role, 'anon');
  t.equal((claims.exp ?? 0) - (claims.iat ?? 0), 10 * 365 * 24 * 3600, 'exp is 10 years after iat');
  t.same(Object.keys(claims).sort(), ['exp', 'iat', 'role']);
  t.equal(decodeJwt(a.serviceRoleKey).role, 'service_role');
  const other = await loadConfig({ DATA_DIR: tmp(t) });
  t.not(other.secret, a.secret, 'another data directory, another secret');
});

t.test('explicit keys must verify with JWT_SECRET and carry the right role', async (t) => {
  const dir = tmp(t);
  const key = new TextEncoder().encode(TEST_JWT_SECRET);
  const anon = await new SignJWT({ role: 'anon' }).setProtectedHeader({ alg: 'HS256' }).sign(key);
  const service = await new SignJWT({ role: 'service_role' }).setProtectedHeader({ alg: 'HS256' }).sign(key);
  const c = await loadConfig({ DATA_DIR: dir, JWT_SECRET: TEST_JWT_SECRET, ANON_KEY: anon, SERVICE_ROLE_KEY: service });
  t.equal(c.anonKey, anon);
  t.equal(c.serviceRoleKey, service);
  t.equal(c.serviceRoleKeyExplicit, true);
  t.equal(c.devMode, false);
  await t.rejects(loadConfig({ DATA_DIR: dir, JWT_SECRET: TEST_JWT_SECRET, ANON_KEY: service }), { message: /ANON_KEY/ }, 'wrong role');
  await t.rejects(loadConfig({ DATA_DIR: dir, JWT_SECRET: 'another-secret-another-secret-another-1', ANON_KEY: anon }), { message: /ANON_KEY/ }, 'not verifying');
  await t.rejects(loadConfig({ DATA_DIR: dir, ANON_KEY: anon }), { message: /ANON_KEY/ }, 'set without JWT_SECRET');
  await t.rejects(loadConfig({ DATA_DIR: dir, JWT_SECRET: TEST_JWT_SECRET, SERVICE_ROLE_KEY: 'garbage' }), { message: /SERVICE_ROLE_KEY/ }, 'not a JWT');
  const derived1 = await loadConfig({ DATA_DIR: dir, JWT_SECRET: TEST_JWT_SECRET });
  const derived2 = await loadConfig({ DATA_DIR: dir, JWT_SECRET: TEST_JWT_SECRET });
  t.equal(derived1.anonKey, derived2.anonKey, 'keys derived from a given secret are stable too');
  t.equal(derived1.serviceRoleKeyExplicit, false);
});

function runMain(env: Record<string, string>): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', ...env } });
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.on('data', (d) => (stdout += d));
    child.on('close', (code) => resolve({ code, stderr, stdout }));
  });
}

t.test('an invalid configuration stops the start: one line on stderr, exit 1', async (t) => {
  for (const [env, name] of [
    [{ JWT_SECRET: 'too-short' }, 'JWT_SECRET'],
    [{ STORAGE_BACKEND: 'ftp' }, 'STORAGE_BACKEND'],
    [{ MIGRATE_ON_START: 'no' }, 'MIGRATE_ON_START'],
    [{ DATABASE_URL: '::::' }, 'DATABASE_URL'],
  ] as const) {
    const r = await runMain({ ...env, DATA_DIR: tmp(t), PORT: '0' });
    t.equal(r.code, 1, `${name}: exit 1`);
    const lines = r.stderr.trim().split('\n');
    t.equal(lines.length, 1, `${name}: one line`);
    t.match(lines[0], name, `${name}: the line names the variable`);
    t.equal(r.stdout, '', `${name}: nothing started`);
  }
});
