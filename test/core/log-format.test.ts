/**
 * LOG_FORMAT: `json` lines by default, readable lines through pino-pretty with `pretty`
 * (the default of `npm run dev`), and an unknown format stops the start naming the variable.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseConfig } from '../../src/core/config.ts';

const LOG = fileURLToPath(new URL('../../src/core/log.ts', import.meta.url));
const run = (format: string) =>
  execFileSync(process.execPath, ['--input-type=module', '-e', `import { createLogger } from ${JSON.stringify(LOG)}; createLogger('info', { format: ${JSON.stringify(format)} }).info({ request_id: 'abc', status: 200 }, 'request');`], { encoding: 'utf8' });

t.test('json and pretty', async (t) => {
  const json = run('json').trim();
  t.match(JSON.parse(json), { msg: 'request', request_id: 'abc', status: 200 }, 'a JSON line');
  const pretty = run('pretty');
  t.throws(() => JSON.parse(pretty.trim()), 'pretty is not JSON');
  t.match(pretty, /INFO.*request/, 'a level and the message');
  t.match(pretty, /request_id: "abc"/, 'and the fields');
});

t.test('LOG_FORMAT is checked', async (t) => {
  t.equal(parseConfig({}).logFormat, 'json');
  t.equal(parseConfig({ LOG_FORMAT: 'pretty' }).logFormat, 'pretty');
  t.throws(() => parseConfig({ LOG_FORMAT: 'xml' }), { message: 'invalid configuration: LOG_FORMAT must be json or pretty' });
});
