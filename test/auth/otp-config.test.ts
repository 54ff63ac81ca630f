/** AUTH_HOOK_SEND_SMS and its secret: the forms GoTrue takes, and clear start-up errors for the others. */
import t from 'tap';
import { parseConfig } from '../../src/core/config.ts';

const SECRET = `v1,whsec_${Buffer.from('a hook secret of at least 16 bytes').toString('base64')}`;

t.test('the send-SMS hook settings', async (t) => {
  t.equal(parseConfig({}).authHookSendSms, null, 'unset: phone sign-in is off');
  t.equal(parseConfig({}).smsRateLimitPerHour, 5);
  t.same(parseConfig({ AUTH_HOOK_SEND_SMS: 'pg-functions://postgres/public/send_sms' }).authHookSendSms, { kind: 'sql', fn: 'public.send_sms' });
  const http = parseConfig({ AUTH_HOOK_SEND_SMS: 'https://sms.example.com/hook', AUTH_HOOK_SEND_SMS_SECRET: `${SECRET}|${SECRET}` }).authHookSendSms;
  t.same(http, { kind: 'http', url: 'https://sms.example.com/hook', secrets: [SECRET.slice(9), SECRET.slice(9)] }, 'an https URL, two secrets');
  for (const [env, name] of [
    [{ AUTH_HOOK_SEND_SMS: 'pg-functions://postgres/public' }, 'AUTH_HOOK_SEND_SMS'],
    [{ AUTH_HOOK_SEND_SMS: 'pg-functions://postgres/Public/x;drop' }, 'AUTH_HOOK_SEND_SMS'],
    [{ AUTH_HOOK_SEND_SMS: 'http://sms.example.com/hook', AUTH_HOOK_SEND_SMS_SECRET: SECRET }, 'AUTH_HOOK_SEND_SMS'],
    [{ AUTH_HOOK_SEND_SMS: 'ftp://sms.example.com/hook', AUTH_HOOK_SEND_SMS_SECRET: SECRET }, 'AUTH_HOOK_SEND_SMS'],
    [{ AUTH_HOOK_SEND_SMS: 'https://sms.example.com/hook' }, 'AUTH_HOOK_SEND_SMS_SECRET'],
    [{ AUTH_HOOK_SEND_SMS: 'https://sms.example.com/hook', AUTH_HOOK_SEND_SMS_SECRET: 'whsec_abc' }, 'AUTH_HOOK_SEND_SMS_SECRET'],
    [{ SMS_RATE_LIMIT_PER_HOUR: '-1' }, 'SMS_RATE_LIMIT_PER_HOUR'],
  ] as const) {
    t.throws(() => parseConfig(env), { message: new RegExp(`invalid configuration: ${name} `) }, JSON.stringify(env));
  }
  t.doesNotThrow(() => parseConfig({ AUTH_HOOK_SEND_SMS: 'http://127.0.0.1:9/sms', AUTH_HOOK_SEND_SMS_SECRET: SECRET }), 'http:// on loopback');
});
