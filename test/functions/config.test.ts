/**
 * The functions' configuration (contract §2 style): FUNCTIONS_TIMEOUT_MS, FUNCTIONS_ENV,
 * EDGE_RUNTIME_SECRET, FUNCTIONS_ALLOW_NET and FUNCTIONS_DENY_NET, their defaults and the
 * one-line errors naming the variable.
 */
import t from 'tap';
import { ConfigError, parseConfig } from '../../src/core/config.ts';

t.test('defaults', async (t) => {
  const c = parseConfig({});
  t.equal(c.functionsTimeoutMs, 60000);
  t.same(c.functionsEnv, {});
  t.equal(c.edgeRuntimeUrl, null);
  t.equal(c.edgeRuntimeSecret, null);
  t.equal(c.functionsAllowNet, null, 'any host');
  t.same(c.functionsDenyNet, [], 'no denial beyond the defaults');
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

t.test('FUNCTIONS_ALLOW_NET and FUNCTIONS_DENY_NET: Deno net entries', async (t) => {
  const c = parseConfig({
    FUNCTIONS_ALLOW_NET: 'api.stripe.com, example.org:8443,10.0.0.0/8:443,[2001:db8::1]:80,*',
    FUNCTIONS_DENY_NET: '192.168.0.0/16,[fe80::1],internal.example',
  });
  t.same(c.functionsAllowNet, ['api.stripe.com', 'example.org:8443', '10.0.0.0/8:443', '[2001:db8::1]:80', '*']);
  t.same(c.functionsDenyNet, ['192.168.0.0/16', '[fe80::1]', 'internal.example']);
  t.same(parseConfig({ FUNCTIONS_ALLOW_NET: 'none' }).functionsAllowNet, [], 'none: no network');
  t.throws(() => parseConfig({ FUNCTIONS_ALLOW_NET: 'none,example.org' }), new ConfigError('FUNCTIONS_ALLOW_NET', 'may hold none only alone'));
  for (const [name, bad] of [
    ['FUNCTIONS_ALLOW_NET', 'fe80::1'],
    ['FUNCTIONS_ALLOW_NET', 'example.org:0'],
    ['FUNCTIONS_ALLOW_NET', 'example.org:70000'],
    ['FUNCTIONS_DENY_NET', 'example.org/8'],
    ['FUNCTIONS_DENY_NET', '10.0.0.0/33'],
    ['FUNCTIONS_DENY_NET', 'http://example.org'],
    ['FUNCTIONS_DENY_NET', '*'],
    ['FUNCTIONS_DENY_NET', ','],
  ]) {
    t.throws(() => parseConfig({ [name]: bad }), { message: new RegExp(`^invalid configuration: ${name} `) }, `${name}=${bad}`);
  }
});
