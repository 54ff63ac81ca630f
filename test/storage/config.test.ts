/** The storage variables of src/core/config.ts (contract §2, issue 13): STORAGE_BACKEND and S3_*. */
import t from 'tap';
import { ConfigError, parseConfig } from '../../src/core/config.ts';

const fails = (env: Record<string, string>, variable: string, name: string) => {
  let caught: unknown = null;
  try {
    parseConfig(env);
  } catch (err) {
    caught = err;
  }
  t.ok(caught instanceof ConfigError && caught.variable === variable, name, { caught: String(caught) });
};

t.test('STORAGE_BACKEND', async (t) => {
  t.equal(parseConfig({}).storageBackend, 'database', 'database by default');
  t.equal(parseConfig({}).s3, null, 'no s3 settings unless the back end is s3');
  t.equal(parseConfig({ STORAGE_BACKEND: 'disk' }).storageBackend, 'disk');
  fails({ STORAGE_BACKEND: 'ftp' }, 'STORAGE_BACKEND', 'an unknown back end stops the start');
});

t.test('S3_*', async (t) => {
  const c = parseConfig({ STORAGE_BACKEND: 's3', S3_BUCKET: 'files' });
  t.same(c.s3, { endpoint: null, bucket: 'files', region: 'us-east-1', accessKeyId: null, secretAccessKey: null, forcePathStyle: false }, 'defaults');
  const d = parseConfig({
    STORAGE_BACKEND: 's3',
    S3_BUCKET: 'files',
    S3_ENDPOINT: 'http://127.0.0.1:9000',
    S3_REGION: 'eu-central-1',
    S3_ACCESS_KEY_ID: 'id',
    S3_SECRET_ACCESS_KEY: 'secret',
    S3_FORCE_PATH_STYLE: 'true',
  });
  t.same(d.s3, { endpoint: 'http://127.0.0.1:9000', bucket: 'files', region: 'eu-central-1', accessKeyId: 'id', secretAccessKey: 'secret', forcePathStyle: true });
  fails({ STORAGE_BACKEND: 's3' }, 'S3_BUCKET', 'S3_BUCKET is required');
  fails({ STORAGE_BACKEND: 's3', S3_BUCKET: 'b', S3_ENDPOINT: 'not a url' }, 'S3_ENDPOINT', 'a malformed endpoint');
  fails({ STORAGE_BACKEND: 's3', S3_BUCKET: 'b', S3_FORCE_PATH_STYLE: 'yes' }, 'S3_FORCE_PATH_STYLE', 'a non-boolean');
  fails({ STORAGE_BACKEND: 's3', S3_BUCKET: 'b', S3_ACCESS_KEY_ID: 'id' }, 'S3_SECRET_ACCESS_KEY', 'a key id without its secret');
  fails({ STORAGE_BACKEND: 'disk', S3_FORCE_PATH_STYLE: 'yes' }, 'S3_FORCE_PATH_STYLE', 'checked whatever the back end');
});
