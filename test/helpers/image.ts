/**
 * The container image without a Docker engine: the Dockerfile's stages played on the local
 * file system, each stage's `/` a folder. COPY copies exactly what it names (from the build
 * context, which .dockerignore filters, or from an earlier stage), WORKDIR and ENV are
 * followed, and a RUN is played only when this file knows it (the install, its clean-up, the
 * folders it makes, the compile cache's warm-up): any other RUN fails, so that a new build
 * step is taught here rather than skipped. What the image's run-time stage holds is then in
 * one folder, with its environment and CMD, for a test to start the service from.
 *
 * An install (a RUN with `npm ci`) is a layer kept in the system's temporary folder, keyed
 * as Docker's layer cache keys it: the stage's files before it, the RUN's text and the
 * stage's environment (and the Node and npm that run it). A change to package-lock.json,
 * patches/ or the install's command installs again.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, delimiter, dirname, join, posix } from 'node:path';

export interface Instruction {
  op: string;
  args: string;
  line: number;
}

/** Dockerfile instructions, continuation lines joined, comments dropped. */
export function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const first = i + 1;
    let l = lines[i];
    if (/^\s*(#|$)/.test(l)) continue;
    while (/\\\s*$/.test(l) && i + 1 < lines.length) {
      i++;
      if (/^\s*#/.test(lines[i])) continue;
      l = l.replace(/\\\s*$/, ' ') + lines[i];
    }
    const [op, ...rest] = l.trim().split(/\s+/);
    out.push({ op: op.toUpperCase(), args: rest.join(' '), line: first });
  }
  return out;
}

export interface Stage {
  name: string | null;
  from: string;
  ins: Instruction[];
}

export function stages(text: string): Stage[] {
  const out: Stage[] = [];
  for (const i of instructions(text)) {
    if (i.op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(i.args);
      if (!m) throw new Error(`Dockerfile:${i.line}: FROM ${i.args}`);
      out.push({ from: m[1], name: m[2] ?? null, ins: [] });
    } else if (out.length === 0) {
      if (i.op !== 'ARG') throw new Error(`Dockerfile:${i.line}: ${i.op} before FROM`);
    } else out.at(-1)!.ins.push(i);
  }
  return out;
}

/** `K=V K2="V 2"` (or the old `K V`) of an ENV instruction. */
export function envPairs(args: string): Record<string, string> {
  const out: Record<string, string> = {};
  const re = /([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g;
  if (!/^[A-Za-z_][A-Za-z0-9_]*=/.test(args)) {
    const [k, ...v] = args.split(/\s+/);
    out[k] = v.join(' ');
    return out;
  }
  for (const m of args.matchAll(re)) out[m[1]] = m[2].startsWith('"') ? (JSON.parse(m[2]) as string) : m[2];
  return out;
}

/** The top-level names .dockerignore leaves out of the build context (the patterns this repository uses: names and `*` globs). */
function ignored(context: string): (name: string) => boolean {
  const file = join(context, '.dockerignore');
  const patterns = existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .map((l) => l.trim().replace(/^\/|\/$/g, ''))
        .filter((l) => l && !l.startsWith('#'))
    : [];
  const res = patterns.map((p) => new RegExp('^' + p.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*') + '(/.*)?$'));
  return (name) => res.some((r) => r.test(name));
}

/** Every file under `dir` (relative paths, sorted), for a layer's key. */
function filesOf(dir: string, rel = ''): string[] {
  if (!existsSync(join(dir, rel))) return [];
  const out: string[] = [];
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const r = rel ? `${rel}/${name}` : name;
    const st = lstatSync(join(dir, r));
    if (st.isDirectory()) out.push(...filesOf(dir, r));
    else out.push(r);
  }
  return out;
}

/**
 * `from` copied to `to` (`link`: hard links, for the install's files, which nothing writes:
 * in the image they belong to root and the service runs as another user).
 */
function copyTree(from: string, to: string, link = false): void {
  mkdirSync(dirname(to), { recursive: true });
  const flags = link ? '-al' : '-a';
  const r = spawnSync('cp', [flags, from, to], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cp ${flags} ${from} ${to}: ${r.stderr}`);
}

export interface ImageOptions {
  /** The build context (the repository). */
  context: string;
  /** An empty folder: each stage's `/` goes under it. */
  out: string;
  /** The environment the base image gives (PATH, HOME): the host's tools stand in for its. */
  baseEnv: Record<string, string>;
  /** Where install layers are kept; null: no cache. */
  cacheDir?: string | null;
  /** A Dockerfile's text other than the context's. */
  dockerfile?: string;
  /** Progress lines. */
  note?: (line: string) => void;
}

export interface Image {
  /** The run-time stage's `/`. */
  root: string;
  /** Its WORKDIR, on this machine. */
  workdir: string;
  /** Its ENV, absolute paths moved under `root`. */
  env: Record<string, string>;
  /** Its CMD (exec form). */
  cmd: string[];
  /** Its USER. */
  user: string | null;
  /** Whether the install came from the layer cache. */
  cached: boolean;
}

interface StageState {
  root: string;
  workdir: string;
  env: Record<string, string>;
}

/** The stage's ENV with absolute paths placed under its root. */
function mapped(st: StageState): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(st.env)) out[k] = v.startsWith('/') ? join(st.root, v) : v;
  return out;
}

/** Play the Dockerfile; returns the run-time (last) stage. */
export function buildImage(o: ImageOptions): Image {
  const text = o.dockerfile ?? readFileSync(join(o.context, 'Dockerfile'), 'utf8');
  const note = o.note ?? (() => {});
  const isIgnored = ignored(o.context);
  const done = new Map<string, StageState>();
  let last: StageState | null = null;
  let cmd: string[] = [];
  let user: string | null = null;
  let cached = false;
  const all = stages(text);
  all.forEach((stage, n) => {
    const root = join(o.out, `stage-${n}`);
    const parent = done.get(stage.from);
    const st: StageState = parent ? { root, workdir: parent.workdir, env: { ...parent.env } } : { root, workdir: '/', env: {} };
    if (parent) copyTree(parent.root, root, true);
    else mkdirSync(root, { recursive: true });
    const at = (p: string) => join(st.root, posix.resolve(st.workdir, p));
    cmd = [];
    user = null;
    for (const i of stage.ins) {
      const where = `Dockerfile:${i.line}`;
      switch (i.op) {
        case 'WORKDIR':
          st.workdir = posix.resolve(st.workdir, i.args);
          mkdirSync(at('.'), { recursive: true });
          break;
        case 'ENV':
          Object.assign(st.env, envPairs(i.args));
          break;
        case 'COPY': {
          const words = i.args.split(/\s+/);
          const flags = words.filter((w) => w.startsWith('--'));
          const paths = words.filter((w) => !w.startsWith('--'));
          const from = flags.find((f) => f.startsWith('--from='))?.slice(7);
          const dest = paths.pop()!;
          if (paths.length === 0) throw new Error(`${where}: COPY without a source`);
          for (const src of paths) {
            let source: string;
            if (from !== undefined) {
              const s = done.get(from);
              if (!s) throw new Error(`${where}: no stage ${from}`);
              source = join(s.root, posix.resolve('/', src));
            } else {
              const top = posix.normalize(src).split('/')[0];
              if (isIgnored(top)) throw new Error(`${where}: ${src} is left out of the build context by .dockerignore`);
              source = join(o.context, src);
            }
            if (!existsSync(source)) throw new Error(`${where}: COPY ${src}: no such file`);
            const dir = dest.endsWith('/') || paths.length > 1 || dest === '.';
            if (statSync(source).isDirectory()) {
              mkdirSync(at(dest), { recursive: true });
              if (from !== undefined) copyTree(`${source}/.`, at(dest), true);
              else cpSync(source, at(dest), { recursive: true, verbatimSymlinks: true, force: true });
            } else {
              const target = dir ? join(at(dest), basename(src)) : at(dest);
              mkdirSync(dirname(target), { recursive: true });
              cpSync(source, target);
            }
          }
          break;
        }
        case 'RUN':
          cached = run(st, i, o, note) || cached;
          break;
        case 'CMD':
          cmd = JSON.parse(i.args) as string[];
          break;
        case 'USER':
          user = i.args;
          break;
        case 'EXPOSE':
        case 'VOLUME':
        case 'HEALTHCHECK':
        case 'LABEL':
        case 'ARG':
          break;
        default:
          throw new Error(`${where}: ${i.op} is not played by test/helpers/image.ts: teach it`);
      }
    }
    if (stage.name) done.set(stage.name, st);
    done.set(String(n), st);
    last = st;
  });
  const fin = last as StageState | null;
  if (fin === null) throw new Error('Dockerfile: no stage');
  return { root: fin.root, workdir: join(fin.root, fin.workdir), env: mapped(fin), cmd, user, cached };
}

/** One RUN: the install (with its layer cache), `rm -rf` of relative paths, `mkdir -p`, `chown`, the compile cache's warm-up. */
function run(st: StageState, i: Instruction, o: ImageOptions, note: (l: string) => void): boolean {
  const where = `Dockerfile:${i.line}`;
  const cwd = join(st.root, st.workdir);
  const env = { ...o.baseEnv, ...mapped(st) };
  if (/\bnpm ci\b/.test(i.args)) {
    const key = createHash('sha256');
    for (const f of filesOf(st.root)) {
      key.update(f + '\0');
      const p = join(st.root, f);
      key.update(lstatSync(p).isSymbolicLink() ? readlinkSync(p) : readFileSync(p));
    }
    const npmVersion = spawnSync('npm', ['--version'], { env, encoding: 'utf8' }).stdout.trim();
    key.update(JSON.stringify({ run: i.args, env: st.env, workdir: st.workdir, node: process.version, npm: npmVersion, platform: process.platform, arch: process.arch }));
    const layer = o.cacheDir ? join(o.cacheDir, key.digest('hex').slice(0, 24)) : null;
    if (layer && existsSync(join(layer, 'root'))) {
      note(`${where}: the install layer from the cache (${layer})`);
      rmSync(st.root, { recursive: true, force: true });
      copyTree(join(layer, 'root'), st.root, true);
      const now = new Date();
      utimesSync(layer, now, now);
      return true;
    }
    for (const part of i.args.split('&&').map((s) => s.trim())) {
      if (/^npm ci\b/.test(part)) {
        note(`${where}: ${part}`);
        const r = spawnSync('npm', part.split(/\s+/).slice(1), { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
        if (r.status !== 0) throw new Error(`${where}: ${part} failed (${r.status})\n${r.stdout}\n${r.stderr}`);
      } else if (/^npm cache clean\b/.test(part)) {
        // The image's npm cache, not this machine's: nothing to play.
      } else if (/^rm -rf\s/.test(part)) {
        for (const p of part.split(/\s+/).slice(2)) {
          if (p.startsWith('/') || p.split('/').includes('..')) throw new Error(`${where}: rm -rf ${p}: only paths inside WORKDIR are played`);
          rmSync(join(cwd, p), { recursive: true, force: true });
        }
      } else throw new Error(`${where}: "${part}" is not played by test/helpers/image.ts: teach it`);
    }
    if (layer) {
      const partial = `${layer}.partial-${process.pid}`;
      rmSync(partial, { recursive: true, force: true });
      copyTree(st.root, join(partial, 'root'), true);
      try {
        renameSync(partial, layer);
      } catch {
        rmSync(partial, { recursive: true, force: true }); // another run stored it first
      }
      pruneLayers(o.cacheDir!, 3);
    }
    return false;
  }
  if (/^mkdir -p\s/.test(i.args)) {
    for (const part of i.args.split('&&').map((s) => s.trim())) {
      if (/^mkdir -p\s/.test(part)) for (const p of part.split(/\s+/).slice(2)) mkdirSync(join(st.root, posix.resolve(st.workdir, p)), { recursive: true });
      else if (/^chown\s/.test(part)) {
        // Ownership: the test runs the service as the user it runs as.
      } else throw new Error(`${where}: "${part}" is not played by test/helpers/image.ts: teach it`);
    }
    return false;
  }
  // The compile cache's warm-up: `K=V … node <flags> src/main.ts; test -n "$(ls -A <cache>)"`.
  const warm = /^((?:[A-Z_]+=\S+\s+)*)node\s+(.*\bsrc\/main\.ts)\s*;\s*test -n "\$\(ls -A (\S+)\)"$/.exec(i.args);
  if (warm) {
    const assigned = envPairs(warm[1].trim() || 'X=');
    delete assigned.X;
    const r = spawnSync(process.execPath, warm[2].split(/\s+/), { cwd, env: { ...env, ...assigned }, encoding: 'utf8' });
    const cache = join(st.root, warm[3]);
    if (!existsSync(cache) || readdirSync(cache).length === 0) throw new Error(`${where}: the compile cache ${warm[3]} is empty after the warm-up\n${r.stdout}${r.stderr}`);
    return false;
  }
  throw new Error(`${where}: RUN ${i.args} is not played by test/helpers/image.ts: teach it`);
}

/** Keep the `keep` install layers used last. */
function pruneLayers(dir: string, keep: number): void {
  const layers = readdirSync(dir)
    .filter((n) => !n.includes('.partial-'))
    .map((n) => ({ n, t: statSync(join(dir, n)).mtimeMs }))
    .sort((a, b) => b.t - a.t);
  for (const { n } of layers.slice(keep)) rmSync(join(dir, n), { recursive: true, force: true });
}

/** Bytes under a folder (apparent sizes, symlinks not followed). */
export function bytesUnder(dir: string): number {
  const r = spawnSync('du', ['-sb', dir], { encoding: 'utf8' });
  return Number(r.stdout.split(/\s+/)[0]);
}

/** The default cache folder for install layers. */
export const LAYER_CACHE = join(tmpdir(), 'plinth-image-layers');

/**
 * What reaches the npm registry from this machine: its CA bundle (a TLS-inspecting proxy's
 * certificate) and its proxies, as the environment and npm's configuration give them. A
 * `docker build` has its builder's network; this play of it has this machine's. Without
 * them npm fails every request with SELF_SIGNED_CERT_IN_CHAIN, retries, and falls back to
 * its cache a minute later per package it must look up.
 */
export function registryEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && /^(NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|SSL_CERT_DIR|(https?|no)_proxy|npm_config_(cafile|ca|registry|proxy|https_proxy|noproxy|strict_ssl))$/i.test(k)) out[k] = v;
  }
  return out;
}

/** PATH without the repository's node_modules/.bin, with this Node first (the base image's `node`). */
export function basePath(): string {
  const parts = (process.env.PATH ?? '').split(delimiter).filter((p) => p && !p.includes('node_modules'));
  return [dirname(process.execPath), ...parts].join(delimiter);
}
