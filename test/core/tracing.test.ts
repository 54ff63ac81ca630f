/**
 * OpenTelemetry, opt-in: with OTEL_EXPORTER_OTLP_ENDPOINT set, a request's trace (its server
 * span and the child span of its database round trip) and a webhook delivery's trace reach a
 * collector over OTLP/HTTP. The collector is a stand-in: an HTTP server that decodes the
 * OTLP JSON the official exporter sends.
 */
import t from 'tap';
import http from 'node:http';
import { startApp } from '../helpers/app.ts';
import { createHook, startReceiver, waitFor } from '../webhooks/helpers.ts';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: Array<{ key: string; value: { stringValue?: string; intValue?: string | number } }>;
}

function attr(s: OtlpSpan, key: string): string | number | undefined {
  const v = s.attributes.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue !== undefined ? Number(v.intValue) : undefined);
}

t.test('traces reach an OTLP collector', async (t) => {
  const spans: OtlpSpan[] = [];
  const services = new Set<string>();
  const collector = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces' && String(req.headers['content-type']).includes('json')) {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans: Array<{ resource: { attributes: OtlpSpan['attributes'] }; scopeSpans: Array<{ spans: OtlpSpan[] }> }>;
        };
        for (const rs of body.resourceSpans) {
          const name = rs.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue;
          if (name) services.add(name);
          for (const ss of rs.scopeSpans) spans.push(...ss.spans);
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
  t.teardown(() => collector.close());
  const port = (collector.address() as { port: number }).port;

  const rx = await startReceiver(t);
  const app = await startApp(t, { env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_SERVICE_NAME: 'plinth-test' } });
  await app.db.sql.unsafe(`create table public.things (id int primary key); grant select, insert on public.things to anon;`).simple();
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  await createHook(app, { url: `${rx.url}/things`, table_name: 'things' });

  const r = await app.call('POST', '/rest/v1/things', { apikey: app.anonKey, body: { id: 1 }, headers: { 'x-request-id': 'traced-1' } });
  t.equal(r.status, 201);
  await waitFor('the request span', () => spans.some((s) => attr(s, 'plinth.request_id') === 'traced-1' && s.name === 'POST /rest/v1/:table'), 20000);
  const server = spans.find((s) => attr(s, 'plinth.request_id') === 'traced-1' && s.name === 'POST /rest/v1/:table')!;
  t.equal(attr(server, 'http.response.status_code'), 201, 'with its status');
  t.equal(attr(server, 'http.route'), '/rest/v1/:table', 'and its route');
  await waitFor('its database span', () => spans.some((s) => s.traceId === server.traceId && s.parentSpanId === server.spanId && s.name === 'db'), 20000);
  t.pass('the database round trip is a child span of the request');
  await waitFor('the delivery span', () => spans.some((s) => s.name === 'webhook delivery' && attr(s, 'plinth.request_id') === 'traced-1'), 20000);
  t.pass('the webhook delivery has a trace naming the request that caused it');
  t.ok(services.has('plinth-test'), 'OTEL_SERVICE_NAME names the service');
});

t.test('without the endpoint no OpenTelemetry code is loaded', async (t) => {
  const fs = await import('node:fs');
  const path = await import('node:path');
  const join = (...parts: string[]) => path.join(...parts);
  const readFileSync = (p: string, enc: 'utf8') => fs.readFileSync(p, enc);
  const readdirSync = (d: string) => fs.readdirSync(d);
  const statSync = (p: string) => fs.statSync(p);
  const src = new URL('../../src', import.meta.url).pathname;
  const walk = (d: string): string[] => readdirSync(d).flatMap((n) => (statSync(join(d, n)).isDirectory() ? walk(join(d, n)) : n.endsWith('.ts') ? [join(d, n)] : []));
  const users = walk(src).filter((f) => /from '@opentelemetry\//.test(readFileSync(f, 'utf8')));
  t.same(users.map((f) => f.slice(src.length)), ['/core/tracing.ts'], 'one module imports OpenTelemetry');
  const importers = walk(src).filter((f) => /tracing\.ts'/.test(readFileSync(f, 'utf8')));
  for (const f of importers) t.notMatch(readFileSync(f, 'utf8'), /^import[^;]*tracing\.ts';/m, `${f.slice(src.length)} loads it only on demand`);
});
