/**
 * Summarise a V8 `.cpuprofile` (from `--cpu-prof`): self time per function and per
 * package, as a share of the busy (non-idle) time.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileLine {
  name: string;
  where: string;
  ms: number;
  share: number;
}

export interface ProfileSummary {
  busyMs: number;
  idleMs: number;
  functions: ProfileLine[];
  packages: ProfileLine[];
}

function packageOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (url.startsWith('node:')) return 'node (core)';
  const src = url.indexOf('/src/');
  if (src >= 0) return `plinth ${url.slice(src + 1).split('/').slice(0, 2).join('/')}`;
  const test = url.indexOf('/test/');
  if (test >= 0) return 'plinth test/';
  return url;
}

function shortUrl(url: string): string {
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) return url.slice(nm + '/node_modules/'.length);
  const src = url.indexOf('/src/');
  if (src >= 0) return url.slice(src + 1);
  return url.replace(/^file:\/\//, '');
}

export function summariseProfile(file: string, top = 25): ProfileSummary {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  for (const n of p.nodes) byId.set(n.id, n);
  const selfUs = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) {
    const id = p.samples[i];
    selfUs.set(id, (selfUs.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
  }
  const fns = new Map<string, ProfileLine>();
  const pkgs = new Map<string, ProfileLine>();
  let idleUs = 0;
  let busyUs = 0;
  for (const [id, us] of selfUs) {
    const cf = byId.get(id)!.callFrame;
    if (cf.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    busyUs += us;
    const name = cf.functionName || '(anonymous)';
    const where = cf.url ? `${shortUrl(cf.url)}:${cf.lineNumber + 1}` : '';
    const key = `${name}@${where}`;
    const f = fns.get(key) ?? { name, where, ms: 0, share: 0 };
    f.ms += us / 1000;
    fns.set(key, f);
    const pkg = packageOf(cf.url, cf.functionName);
    const g = pkgs.get(pkg) ?? { name: pkg, where: '', ms: 0, share: 0 };
    g.ms += us / 1000;
    pkgs.set(pkg, g);
  }
  const finish = (m: Map<string, ProfileLine>) =>
    [...m.values()]
      .map((l) => ({ ...l, ms: Math.round(l.ms), share: busyUs ? l.ms / (busyUs / 1000) : 0 }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, top);
  return { busyMs: Math.round(busyUs / 1000), idleMs: Math.round(idleUs / 1000), functions: finish(fns), packages: finish(pkgs) };
}

export function formatProfile(s: ProfileSummary): string {
  const pct = (x: number) => `${(x * 100).toFixed(1).padStart(5)} %`;
  const lines = [`busy ${s.busyMs} ms, idle ${s.idleMs} ms`, '', 'self time by package:'];
  for (const l of s.packages) lines.push(`  ${pct(l.share)}  ${String(l.ms).padStart(7)} ms  ${l.name}`);
  lines.push('', 'self time by function:');
  for (const l of s.functions) lines.push(`  ${pct(l.share)}  ${String(l.ms).padStart(7)} ms  ${l.name}  ${l.where}`);
  return lines.join('\n');
}

/** Main-thread CPU per request, by package: the service beside the baseline. */
export function formatComparison(svc: ProfileSummary, svcRequests: number, base: ProfileSummary, baseRequests: number): string {
  const us = (ms: number, n: number) => ((ms * 1000) / n).toFixed(1).padStart(8);
  const names = [...new Set([...svc.packages.map((p) => p.name), ...base.packages.map((p) => p.name)])];
  const lines = [
    `main-thread CPU per request (µs): service ${us(svc.busyMs, svcRequests).trim()}, baseline ${us(base.busyMs, baseRequests).trim()}`,
    `  ${'service'.padStart(8)}  ${'baseline'.padStart(8)}  package`,
  ];
  const rows = names
    .map((n) => ({ n, s: svc.packages.find((p) => p.name === n)?.ms ?? 0, b: base.packages.find((p) => p.name === n)?.ms ?? 0 }))
    .sort((a, b) => b.s / svcRequests - a.s / svcRequests);
  for (const r of rows) lines.push(`  ${us(r.s, svcRequests)}  ${us(r.b, baseRequests)}  ${r.n}`);
  return lines.join('\n');
}

// `node test/bench/profile.ts FILE.cpuprofile [TOP]`
if (import.meta.main) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: node test/bench/profile.ts FILE.cpuprofile [TOP]');
    process.exit(2);
  }
  console.log(formatProfile(summariseProfile(file, Number(process.argv[3] ?? 30))));
}
