/**
 * Input rules (issue item 3): email validation rejects invalid addresses and accepts valid
 * unusual ones; password length counts characters (code points), 8 to 256.
 */
import t from 'tap';
import { isValidEmail, passwordProblem } from '../../src/auth/validate.ts';

t.test('valid addresses, including unusual ones', async (t) => {
  for (const email of [
    'simple@example.com',
    'very.common@example.com',
    'x@example.io',
    'first.last+tag@sub.domain.example.co.uk',
    "o'brien@example.ie",
    'user-name_with.symbols!#$%&*+/=?^`{|}~@example.org',
    '"john doe"@example.com',
    '"quoted@at"@example.com',
    '"escaped \\" quote"@example.com',
    'jörg@bücher.de',
    '用户@例子.广告',
    'δοκιμή@παράδειγμα.δοκιμή',
    'user@[192.0.2.1]',
    'user@[IPv6:2001:db8::1]',
    'a@b.co',
    '1234567890@example.com',
    'user@xn--bcher-kva.de',
    'user@123.example.com',
    `${'l'.repeat(64)}@example.com`,
  ]) {
    t.ok(isValidEmail(email), email);
  }
});

t.test('invalid addresses', async (t) => {
  for (const email of [
    '',
    'plainaddress',
    '@example.com',
    'user@',
    'user@@example.com',
    'a@b@example.com',
    'user name@example.com',
    ' user@example.com',
    'user@example.com ',
    'user@exa mple.com',
    '.user@example.com',
    'user.@example.com',
    'us..er@example.com',
    'user@example',
    'user@localhost',
    'user@.example.com',
    'user@example..com',
    'user@example.com.',
    'user@-example.com',
    'user@example-.com',
    'user@exa_mple.com',
    'user@example.123',
    'user@[300.1.1.1]',
    'user@[not-an-ip]',
    'user\n@example.com',
    'user@exam\u0000ple.com',
    '"unterminated@example.com',
    'a"b@example.com',
    `${'l'.repeat(65)}@example.com`,
    `user@${'d'.repeat(64)}.com`,
    `user@${'abcdefghi.'.repeat(25)}com`,
    'user@<example.com>',
    'user@example.com,other@example.com',
  ]) {
    t.notOk(isValidEmail(email), JSON.stringify(email));
  }
});

t.test('password length in characters: 8 to 256', async (t) => {
  t.equal(passwordProblem('1234567')?.publicMessage, 'password must be at least 8 characters');
  t.equal(passwordProblem('')?.publicMessage, 'password must be at least 8 characters');
  t.equal(passwordProblem('12345678'), null);
  t.equal(passwordProblem('x'.repeat(256)), null);
  t.equal(passwordProblem('x'.repeat(257))?.publicMessage, 'password must be at most 256 characters');
  t.equal(passwordProblem('é'.repeat(256)), null, '256 two-byte characters are 256 characters');
  t.equal(passwordProblem('🔑'.repeat(8)), null, '8 emoji are 8 characters');
  t.equal(passwordProblem('🔑'.repeat(7))?.status, 400, '7 emoji are too few');
  t.equal(passwordProblem('🔑'.repeat(256)), null, '256 emoji are allowed');
});
