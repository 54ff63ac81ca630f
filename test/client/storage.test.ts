/**
 * Storage and error helpers of the client in Node (issue 16 §2, §4): object paths, upload
 * bodies and content types, and the `{error}` body read into PlinthError. The round trip
 * against the service is in browser-storage.test.ts.
 */
import t from 'tap';
import { encodePath, uploadBody } from '../../src/client/storage.ts';
import { errorFromBody, PlinthError } from '../../src/client/http.ts';

t.test('encodePath encodes each segment and keeps the slashes', async (t) => {
  t.equal(encodePath('a/b c.txt'), 'a/b%20c.txt');
  t.equal(encodePath('/lead/slash.txt'), 'lead/slash.txt');
  t.equal(encodePath('ü/#?.txt'), '%C3%BC/%23%3F.txt');
  t.equal(encodePath('../x'), '../x', 'dots are left for the service to refuse (400)');
});

t.test('uploadBody: content type from the option, the Blob, or none', async (t) => {
  const blob = new Blob(['x'], { type: 'image/png' });
  t.equal((await uploadBody(blob, {}, false)).contentType, 'image/png', 'the Blob type');
  t.equal((await uploadBody(blob, { contentType: 'text/plain' }, false)).contentType, 'text/plain', 'the option wins');
  t.equal((await uploadBody(new Blob(['x']), {}, false)).contentType, undefined, 'untyped: the service guesses from the extension');
  const buf = await uploadBody(new ArrayBuffer(3), {}, false);
  t.equal(buf.contentType, undefined);
  t.ok(buf.raw instanceof ArrayBuffer);
  t.equal((await uploadBody('text', {}, false)).contentType, 'text/plain;charset=UTF-8');
  const file = new File(['x'], 'a.json', { type: 'application/json' });
  t.equal((await uploadBody(file, {}, false)).contentType, 'application/json', 'a File');
});

t.test('uploadBody: a ReadableStream is streamed in Node and buffered in a browser', async (t) => {
  const stream = () =>
    new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('ab'));
        c.enqueue(new TextEncoder().encode('cd'));
        c.close();
      },
    });
  const node = await uploadBody(stream(), { contentType: 'text/plain' }, false);
  t.equal(node.duplex, 'half');
  t.ok(node.raw instanceof ReadableStream);
  const browser = await uploadBody(stream(), {}, true);
  t.equal(browser.duplex, undefined);
  t.ok(browser.raw instanceof Blob);
  t.equal(await (browser.raw as Blob).text(), 'abcd');
});

t.test('errorFromBody reads the service message', async (t) => {
  const e = errorFromBody(409, '{"error":"bucket not empty"}', 'application/json');
  t.ok(e instanceof PlinthError);
  t.equal(e.message, 'bucket not empty');
  t.equal(e.status, 409);
  t.same(e.body, { error: 'bucket not empty' });
  t.same(JSON.parse(JSON.stringify(e)), { name: 'PlinthError', message: 'bucket not empty', status: 409 });
  t.equal(errorFromBody(400, '{"message":"m"}', 'application/json').message, 'm');
  t.equal(errorFromBody(502, 'Bad Gateway', 'text/plain').message, 'Bad Gateway');
  t.equal(errorFromBody(500, '', null).message, 'request failed with status 500');
  t.equal(errorFromBody(400, '{broken', 'application/json').message, '{broken');
});
