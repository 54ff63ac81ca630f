/**
 * What `npm run dev` prints for graphile-migrate's watch on the application's current.sql:
 * one readable line per save, with its time: applied (and how long it took), unchanged, or
 * failed with the file, the line and column, and PostgreSQL's code and message (its detail
 * and hint on the lines under it). Nothing else of graphile-migrate's chatter.
 */
import { Logger as GraphileLogger } from '@graphile/logger';

const time = () => new Date().toTimeString().slice(0, 8);

/** graphile-migrate paints its messages; the line reads as text. */
const ESC = String.fromCharCode(27);
const plain = (s: string) => s.split(ESC).map((part, i) => (i === 0 ? part : part.replace(/^\[[0-9;]*m/, ''))).join('');

interface DbError {
  message?: string;
  code?: string;
  detail?: string;
  hint?: string;
  _gmMessageOverride?: string;
}

/** The lines of a failed run of `file` (graphile-migrate's error, with its position when PostgreSQL gave one). */
export function failureLines(file: string, e: DbError): string[] {
  const at = /line (\d+), column (\d+)/.exec(plain(e._gmMessageOverride ?? ''));
  const where = at ? `${file}:${at[1]}:${at[2]}` : file;
  const lines = [`migrations: ${where} failed at ${time()}: ${e.code ? `${e.code} ` : ''}${e.message ?? 'unknown error'}`];
  if (e.detail) lines.push(`  detail: ${e.detail}`);
  if (e.hint) lines.push(`  hint: ${e.hint}`);
  if (at === null && e.code === undefined) lines.push('  (nothing was applied; fix the file and save it again)');
  return lines;
}

/** A graphile-migrate logger writing those lines through `write` (one call per line). */
export function watchLogger(file: string, write: (line: string) => void): GraphileLogger {
  let unchanged = false;
  return new GraphileLogger(() => (level, message, meta) => {
    const text = plain(String(message));
    const name = String(level);
    if (name === 'error') {
      const e = (meta as { error?: DbError } | undefined)?.error;
      for (const l of e ? failureLines(file, e) : [`migrations: ${text.trim()}`]) write(l);
      unchanged = false;
    } else if (/Running current\.sql/.test(text)) unchanged = false;
    else if (/current\.sql unchanged/.test(text)) unchanged = true;
    else if (/Finished \((\d+)ms/.test(text)) {
      const ms = /Finished \((\d+)ms/.exec(text)![1];
      write(unchanged ? `migrations: ${file} unchanged at ${time()}: nothing to apply` : `migrations: ${file} applied at ${time()} (${ms} ms)`);
    } else if (name === 'warning') write(`migrations: ${text.trim()}`);
  });
}
