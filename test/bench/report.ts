/**
 * The bench's report: the table on stdout, the JSON (--json) and the docs table
 * (--write-docs), of every scenario that finished; the others are listed as NOT RUN, with
 * why. Whatever stops a run writes it: the end of the run, its own time limit, SIGINT or
 * SIGTERM, an error outside the scenarios (`BenchReport.guard`, `BenchReport.finish`). A
 * scenario's own error is a finished row (ERROR, with its note), and the run goes on.
 */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { GcStats, Pauses } from './ipc.ts';

export type Status = 'PASS' | 'MISS' | 'INFO' | 'ERROR' | 'UNAVAILABLE' | 'NOT RUN';

export interface Row {
  name: string;
  status: Status;
  rps: number | null;
  baseline_rps: number | null;
  ratio: number | null;
  p50_ms: number | null;
  p99_ms: number | null;
  /** The baseline's p99 at the same fixed rate. */
  baseline_p99_ms?: number | null;
  rss_mb: number | null;
  target: string;
  baseline: string;
  /** The fixed rate latency was measured at. */
  rate_rps: number | null;
  elu: number | null;
  eld_p99_ms: number | null;
  /** The baseline process's own event-loop delay p99 at the fixed rate (when it answers itself). */
  baseline_eld_p99_ms?: number | null;
  non2xx_share: number | null;
  /** GC pauses of each side during its fixed-rate slices (what sets the p99 tail). */
  gc?: { service: GcStats; baseline: GcStats | null };
  note?: string;
  extra?: Record<string, unknown>;
}

/** What a report needs of a scenario. */
export interface Named {
  name: string;
}

export interface ReportOptions {
  /** The scenarios of the run, in the order the report lists them. */
  scenarios: readonly Named[];
  /** A row for a scenario that has none (NOT RUN is set on it). */
  emptyRow: (s: Named) => Row;
  /** --json: where the JSON goes. */
  json?: string;
  /** The run's facts for the JSON's `meta` (called when the report is written). */
  meta: () => Record<string, unknown>;
  /** The lines printed under the table (durations, load), given the seconds the run took. */
  footer?: (seconds: number) => string[];
  /** --write-docs: writes the table into the docs. */
  writeDocs?: (rows: Row[]) => void;
  /** Where the report goes (default: console.log). */
  print?: (line: string) => void;
}

function fmtGc(g: GcStats): string {
  const part = (p: Pauses) => (p.n === 0 ? '0' : `${p.n} (${p.ms.toFixed(0)} ms, max ${p.max_ms.toFixed(1)})`);
  return `young ${part(g.young)}, full ${part(g.full)}`;
}

function fmt(n: number | null, digits = 0): string {
  return n === null || Number.isNaN(n) ? '—' : n.toFixed(digits);
}

/** The table of rows, and each row's baseline, note and GC pauses under it. */
export function formatTable(rows: readonly Row[]): string[] {
  const head = ['scenario', 'rps', 'baseline', 'ratio', 'target', 'rate', 'p50 ms', 'p99 ms', 'base p99', 'rss MB', 'elu', 'eld p99', 'base eld', 'result'];
  const body = rows.map((r) => [
    r.name,
    fmt(r.rps),
    fmt(r.baseline_rps),
    fmt(r.ratio, 2),
    r.target,
    fmt(r.rate_rps),
    fmt(r.p50_ms, 1),
    fmt(r.p99_ms, 1),
    fmt(r.baseline_p99_ms ?? null, 1),
    fmt(r.rss_mb),
    fmt(r.elu, 2),
    fmt(r.eld_p99_ms, 1),
    fmt(r.baseline_eld_p99_ms ?? null, 1),
    r.status,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 || i === cells.length - 1 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  const out = [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line), ''];
  for (const r of rows) out.push(`${r.name}: baseline = ${r.baseline}${r.note ? `; ${r.note}` : ''}`);
  const withGc = rows.filter((r) => r.gc);
  if (withGc.length > 0) {
    out.push('', 'GC pauses at the fixed rate (count (total, longest)):');
    for (const r of withGc) out.push(`${r.name}: service ${fmtGc(r.gc!.service)}${r.gc!.baseline ? `; baseline ${fmtGc(r.gc!.baseline)}` : ''}`);
  }
  return out;
}

/** A row as the JSON lists it. */
export function jsonRow(r: Row): Record<string, unknown> {
  return {
    name: r.name,
    rps: r.rps === null ? null : Math.round(r.rps),
    baseline_rps: r.baseline_rps === null ? null : Math.round(r.baseline_rps),
    ratio: r.ratio === null ? null : Math.round(r.ratio * 1000) / 1000,
    p50_ms: r.p50_ms,
    p99_ms: r.p99_ms,
    baseline_p99_ms: r.baseline_p99_ms ?? null,
    rss_mb: r.rss_mb,
    status: r.status,
    target: r.target,
    baseline: r.baseline,
    rate_rps: r.rate_rps,
    elu: r.elu,
    eld_p99_ms: r.eld_p99_ms,
    baseline_eld_p99_ms: r.baseline_eld_p99_ms ?? null,
    non2xx_share: r.non2xx_share,
    ...(r.gc ? { gc: r.gc } : {}),
    ...(r.note ? { note: r.note } : {}),
    ...(r.extra ? { extra: r.extra } : {}),
  };
}

/** What stops a run before its end, for `guard`. */
export interface StopHooks {
  /** Stops the children and drops the database. */
  cleanup(): Promise<void>;
  exit(code: number): void;
}

export class BenchReport {
  private readonly o: ReportOptions;
  private readonly rows = new Map<string, Row>();
  private running: string | null = null;
  private written = false;
  /** Why the run is being stopped (by `guard`), or null: the run goes on, and nothing else may end it meanwhile. */
  stopping: string | null = null;
  private readonly started = Date.now();

  constructor(o: ReportOptions) {
    this.o = o;
  }

  /** A scenario begins (named as the one interrupted, should the run stop now). */
  begin(name: string): void {
    this.running = name;
  }

  /** A scenario's row, finished (whatever its status). */
  add(row: Row): void {
    this.rows.set(row.name, row);
    if (this.running === row.name) this.running = null;
  }

  /** Every scenario of the run in order: the finished ones' rows, the others NOT RUN, with `why` (null: the run's end). */
  all(why: string | null): Row[] {
    return this.o.scenarios.map((s) => {
      const r = this.rows.get(s.name);
      if (r) return r;
      const note = s.name === this.running ? `stopped while it ran: ${why ?? 'the run ended'}` : `not run: ${why ?? 'the run ended first'}`;
      return { ...this.o.emptyRow(s), status: 'NOT RUN' as const, note };
    });
  }

  /** Print the table and write the JSON (and the docs table), once: `why` says what stopped the run (null: its end). */
  finish(why: string | null): Row[] | null {
    if (this.written) return null;
    this.written = true;
    const print = this.o.print ?? ((line: string) => console.log(line));
    const rows = this.all(why);
    print('');
    for (const line of formatTable(rows)) print(line);
    if (why !== null) print(`\nthe run stopped early: ${why}; ${rows.filter((r) => r.status !== 'NOT RUN').length} of ${rows.length} scenarios finished`);
    const seconds = (Date.now() - this.started) / 1000;
    for (const line of this.o.footer?.(seconds) ?? []) print(line);
    if (this.o.json) {
      const file = resolve(this.o.json);
      const out = { meta: { ...this.o.meta(), seconds: Math.round(seconds), stopped: why }, scenarios: rows.map(jsonRow) };
      writeFileSync(file, JSON.stringify(out, null, 2) + '\n');
      print(`wrote ${file}`);
    }
    if (this.o.writeDocs) this.o.writeDocs(rows);
    return rows;
  }

  /**
   * Stop the run after `limitS` seconds, or on SIGINT or SIGTERM, with the report written
   * first: exit 1 at the limit, 130 on a signal. Returns the disarming (the run's end).
   */
  guard(limitS: number, hooks: StopHooks): () => void {
    const stop = (why: string, code: number) => {
      if (this.stopping !== null) return;
      this.stopping = why;
      console.error(`bench: ${why}; writing the report, then cleaning up`);
      try {
        this.finish(why);
      } catch (err) {
        console.error('bench: could not write the report:', err);
      }
      void hooks.cleanup().finally(() => hooks.exit(code));
    };
    const timer = setTimeout(() => stop(`still running after its limit of ${limitS} s`, 1), limitS * 1000);
    timer.unref();
    const onInt = () => stop('SIGINT', 130);
    const onTerm = () => stop('SIGTERM', 130);
    process.once('SIGINT', onInt);
    process.once('SIGTERM', onTerm);
    return () => {
      clearTimeout(timer);
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
    };
  }
}
