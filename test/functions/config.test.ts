/**
 * The functions' configuration (contract §2 style): FUNCTIONS_TIMEOUT_MS, FUNCTIONS_ENV and
 * EDGE_RUNTIME_SECRET, their defaults and the one-line errors naming the variable.
 */
import t from 'tap';
import { ConfigError, parseConfig } from '../../src/core/config.ts';

t.test('defaults', async (t) => {
  const c = parseConfig({});
  t.equal(c.functionsTimeoutMs, 60000);
  t.same(c.functionsEnv, {});
  t.equal(c.edgeRuntimeUrl, null);
  t.equal(c.edgeRuntimeSecret, null);
  t.match(c.functionsDir, /\/functions$/);
});

t.test('FUNCTIONS_ENV: names with their values, null when unset', async (t) => {
  const c = parseConfig({ FUNCTIONS_ENV: 'STRIPE_KEY, MISSING_ONE,', STRIPE_KEY: 'sk_test' });
  t.same(c.functionsEnv, { STRIPE_KEY: 'sk_test', MISSING_ONE: null });
  t.ok(Object.isFrozen(c.functionsEnv));
});

t.test('invalid values stop the start, naming the variable', async (t) => {
  t.throws(() => parseConfig({ FUNCTIONS_ENV: 'OK,not-a-name' }), new ConfigError('FUNCTIONS_ENV', 'has an invalid variable name "not-a-name"'));
  t.throws(() => parseConfig({ FUNCTIONS_TIMEOUT_MS: 'soon' }), { message: /^invalid configuration: FUNCTIONS_TIMEOUT_MS / });
  t.throws(() => parseConfig({ FUNCTIONS_TIMEOUT_MS: '0' }), { message: /^invalid configuration: FUNCTIONS_TIMEOUT_MS / });
  t.equal(parseConfig({ FUNCTIONS_TIMEOUT_MS: '250' }).functionsTimeoutMs, 250);
});

t.test('EDGE_RUNTIME_SECRET: at least 32 printable characters without spaces', async (t) => {
  const secret = 'abcdefghijklmnopqrstuvwxyz-0123456789';
  t.equal(parseConfig({ EDGE_RUNTIME_SECRET: secret }).edgeRuntimeSecret, secret);
  for (const bad of ['short', 'has a space in it somewhere, really long enough', `${secret}\u00e9`]) {
    t.throws(() => parseConfig({ EDGE_RUNTIME_SECRET: bad }), new ConfigError('EDGE_RUNTIME_SECRET', 'must be at least 32 printable ASCII characters without spaces'));
  }
});
