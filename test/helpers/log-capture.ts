/** A real pino logger whose JSON lines a test reads back (a service's log, captured). */
import { Writable } from 'node:stream';
import pino from 'pino';

export function captureLog(level = 'info'): { lines: Record<string, unknown>[]; log: pino.Logger } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { lines, log: pino({ level, base: undefined }, stream) };
}
