/**
 * The webhook scenarios' receiver, in a process of its own (forked by webhooks.ts): a
 * receiver in the driver would take its CPU from the single thread that generates the load
 * (autocannon), so each delivery would slow the writers through the driver, not through
 * the machine. It answers 200 at once and reports over IPC, every 10 ms, the requests
 * received and the arrival of each record id (epoch ms, comparable across processes).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';

export interface ReceiverReport {
  count: number;
  /** [record id, arrival in epoch ms] since the last report. */
  arrivals: Array<[number, number]>;
}

let count = 0;
let pending: Array<[number, number]> = [];
let reported = 0;
const server = http.createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const at = performance.timeOrigin + performance.now();
    count++;
    const id = Number(/"id":(\d+)/.exec(Buffer.concat(chunks).toString('utf8'))?.[1]);
    if (Number.isFinite(id)) pending.push([id, at]);
    res.writeHead(200, { 'content-length': '0' }).end();
  });
});
server.listen(0, '127.0.0.1', () => {
  process.send!({ port: (server.address() as AddressInfo).port });
  setInterval(() => {
    if (count === reported) return;
    reported = count;
    const report: ReceiverReport = { count, arrivals: pending };
    pending = [];
    process.send!(report);
  }, 10);
});
process.on('disconnect', () => process.exit(0));
