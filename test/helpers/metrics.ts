/** The Prometheus text format of `/metrics`, parsed (tests read samples, never grep lines). */

export type Samples = Map<string, Array<{ labels: Record<string, string>; value: number }>>;

/** The Prometheus text format → samples by name, each with its labels and value. */
export function parseMetrics(text: string): Samples {
  const out: Samples = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, (_x, c: string) => (c === 'n' ? '\n' : c));
    const list = out.get(m[1]) ?? [];
    list.push({ labels, value: Number(m[3]) });
    out.set(m[1], list);
  }
  return out;
}

/** The value of the first sample of `name` with these labels (0 when there is none). */
export function sample(m: Samples, name: string, labels: Record<string, string> = {}): number {
  const hit = (m.get(name) ?? []).find((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return hit?.value ?? 0;
}

/** A service's `/metrics` with the service role's key, parsed. */
export async function scrapeMetrics(url: string, serviceKey: string): Promise<Samples> {
  const r = await fetch(`${url}/metrics`, { headers: { apikey: serviceKey, authorization: `Bearer ${serviceKey}` } });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`metrics: ${r.status}`);
  return parseMetrics(text);
}
