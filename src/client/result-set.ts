/**
 * A live query's result on the client: its rows as a multiset of whole rows (compared as
 * canonical JSON, as jsonb compares them), the deltas applied to it, and the `seq` order
 * that says whether a delta applies, is a gap (re-fetch) or was already seen.
 */
export type Row = Record<string, unknown>;

/** Canonical JSON (sorted keys): rows compare whole, as jsonb does. */
export function canonical(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'null';
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .sort()
    .filter((k) => o[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
    .join(',')}}`;
}

export interface Delta {
  query_id?: string;
  seq: number;
  inserted?: Row[];
  deleted?: Row[];
}

/** The rows of a live query as a multiset of whole rows. */
export class ResultSet {
  rows: Row[] = [];

  replace(rows: Row[]): void {
    this.rows = [...rows];
  }

  /**
   * Apply one delta: each deleted row removes one equal row, each inserted row is added.
   * `idempotent` (for deltas that arrived while a refetch ran, whose result may already
   * hold them): an inserted row already present is not added again.
   */
  apply(delta: { inserted?: Row[]; deleted?: Row[] }, idempotent = false): void {
    const rows = [...this.rows];
    const keys = rows.map(canonical);
    for (const d of delta.deleted ?? []) {
      const i = keys.indexOf(canonical(d));
      if (i >= 0) {
        rows.splice(i, 1);
        keys.splice(i, 1);
      }
    }
    for (const r of delta.inserted ?? []) {
      const k = canonical(r);
      if (idempotent && keys.includes(k)) continue;
      rows.push(r);
      keys.push(k);
    }
    this.rows = rows;
  }
}

/** What the next `seq` means: apply it, re-fetch (a gap), or ignore it (already seen). */
export class SeqTracker {
  last: number | null = null;

  /** Forget the position (after a reconnect: the next seq seen is the new baseline). */
  reset(): void {
    this.last = null;
  }

  next(seq: number): 'apply' | 'gap' | 'old' {
    if (this.last !== null && seq <= this.last) return 'old';
    const gap = this.last !== null && seq > this.last + 1;
    this.last = seq;
    return gap ? 'gap' : 'apply';
  }
}
