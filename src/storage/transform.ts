/**
 * Image transformations with sharp, as Supabase's `/render/image` routes serve them:
 * `width`, `height` (1–2500), `resize` (`cover`, `contain` — fit inside the box, no
 * padding — or `fill`), `quality` (20–100, default 80) and `format` (`origin`, `webp`,
 * `avif`; default `origin`). Sources: JPEG, PNG, WebP, AVIF or GIF of at most 25 MB.
 *
 * What a render may cost is bounded (docs/security.md, "Image renders"): the source's
 * stored type must name one of the five formats and its bytes must be one (image-input.ts),
 * its header at most IMAGE_MAX_PIXELS pixels; renders run a few at a time
 * (render-slots.ts), each on one libvips thread and for at most RENDER_SECONDS; an object
 * has at most MAX_VARIANTS variants.
 *
 * A variant is rendered once and kept under DATA_DIR/image-cache/<object id>/ (folders 0700,
 * files 0600): every upload (a replacement too) is a new object id, so a changed object
 * never serves an old variant; the sweep job removes the variants of objects that are gone.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { Sql } from '../core/db.ts';
import { AppError } from '../core/errors.ts';
import { headerAgrees, headerPixels, sniffImage, type SourceFormat } from './image-input.ts';
import { DIR_MODE, FILE_MODE } from './modes.ts';
import { RenderSlots } from './render-slots.ts';

export const MAX_SOURCE_BYTES = 25 * 1024 * 1024;
export const MAX_SIDE = 2500;
/** Variants one object may have; a new one past it is refused (400), those made still serve. */
export const MAX_VARIANTS = 32;
/** A render that runs longer is stopped (sharp's timeout) and answered 413. */
export const RENDER_SECONDS = 10;
/** Renders that may wait for a slot, and how long each may wait, before 503. */
const RENDER_QUEUE = 16;
const RENDER_WAIT_MS = 10_000;
const SOURCES = new Set(['image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/gif']);
const OUT_TYPES: Record<string, string> = { jpeg: 'image/jpeg', png: 'image/png', webp: 'image/webp', avif: 'image/avif', gif: 'image/gif' };

export const TRANSFORM_ERRORS = {
  invalid: () => new AppError(400, 'invalid transformation'),
  disabled: () => new AppError(400, 'image transformation is disabled'),
  tooLarge: () => new AppError(413, 'image too large to transform'),
  unsupported: () => new AppError(415, 'image format not supported'),
  tooManyVariants: () => new AppError(400, 'too many variants of this image'),
} as const;

export interface Transform {
  width: number | null;
  height: number | null;
  resize: 'cover' | 'contain' | 'fill';
  quality: number;
  format: 'origin' | 'webp' | 'avif';
}

const side = (v: unknown): number | null => {
  if (v === undefined || v === null || v === '') return null;
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > MAX_SIDE) throw TRANSFORM_ERRORS.invalid();
  return n;
};

/** The source's bytes, 413 past MAX_SOURCE_BYTES. */
async function readBounded(input: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of input as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > MAX_SOURCE_BYTES) {
      input.destroy();
      throw TRANSFORM_ERRORS.tooLarge();
    }
    chunks.push(c);
  }
  return Buffer.concat(chunks, n);
}

const overLimit = (err: unknown) => /pixel limit/i.test(String(err));

/** The options of a query string (or of a signed token's `transform`); throws 400 `invalid transformation`. */
export function parseTransform(q: Record<string, unknown>): Transform {
  const resize = q.resize ?? 'cover';
  const format = q.format ?? 'origin';
  const quality = q.quality === undefined || q.quality === '' ? 80 : Number(q.quality);
  if (resize !== 'cover' && resize !== 'contain' && resize !== 'fill') throw TRANSFORM_ERRORS.invalid();
  if (format !== 'origin' && format !== 'webp' && format !== 'avif') throw TRANSFORM_ERRORS.invalid();
  if (!Number.isInteger(quality) || quality < 20 || quality > 100) throw TRANSFORM_ERRORS.invalid();
  return { width: side(q.width), height: side(q.height), resize, quality, format };
}

export interface Variant {
  path: string;
  size: number;
  contentType: string;
  /** Distinct per object and options. */
  key: string;
}

export interface RenderLimits {
  /** IMAGE_MAX_PIXELS */
  maxPixels: number;
  /** IMAGE_RENDER_CONCURRENCY */
  concurrency: number;
}

type Sharp = (typeof import('sharp'))['default'];

/** sharp, loaded on the first render (it is large), set up once: one libvips thread per render, no operation cache. */
let sharpModule: Promise<Sharp> | null = null;
const loadSharp = (): Promise<Sharp> =>
  (sharpModule ??= import('sharp').then(({ default: sharp }) => {
    sharp.concurrency(1);
    sharp.cache(false); // each render is of other bytes: a cache only holds memory
    return sharp;
  }));

export class ImageCache {
  readonly #dir: string;
  readonly #maxPixels: number;
  readonly #slots: RenderSlots;

  constructor(dataDir: string, limits: RenderLimits) {
    this.#dir = join(dataDir, 'image-cache');
    this.#maxPixels = limits.maxPixels;
    this.#slots = new RenderSlots(limits.concurrency, RENDER_QUEUE, RENDER_WAIT_MS);
  }

  /** The image-cache folder (for the start's tightening of modes). */
  get dir(): string {
    return this.#dir;
  }

  /** The variant of object `id` for `t`: from the cache, or rendered from `source()` and kept. */
  async variant(id: string, mimeType: string, size: number, t: Transform, source: () => Promise<Readable | null>): Promise<Variant | null> {
    const type = mimeType.split(';')[0].trim().toLowerCase();
    if (!SOURCES.has(type)) throw TRANSFORM_ERRORS.unsupported();
    if (size > MAX_SOURCE_BYTES) throw TRANSFORM_ERRORS.tooLarge();
    const key = createHash('sha256').update(JSON.stringify(t)).digest('hex').slice(0, 16);
    const dir = join(this.#dir, id);
    const found = await this.#find(dir, key);
    if (found) return found;
    return this.#slots.run(async () => {
      // Counted in the slot: at most the cap of renders at once can pass it together.
      if ((await this.#count(dir)) >= MAX_VARIANTS) throw TRANSFORM_ERRORS.tooManyVariants();
      const input = await source();
      if (input === null) return null;
      const out = await this.#render(await readBounded(input), t);
      const ext = out.info.format === 'heif' ? 'avif' : out.info.format;
      await mkdir(dir, { recursive: true, mode: DIR_MODE });
      const path = join(dir, `${key}.${ext}`);
      const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}`;
      await writeFile(tmp, out.data, { mode: FILE_MODE, flag: 'wx' });
      await rename(tmp, path); // whole or absent, also when two requests render it at once
      return { path, size: out.data.length, contentType: OUT_TYPES[ext] ?? 'application/octet-stream', key: `${id.replaceAll('-', '')}-${key}` };
    });
  }

  /** Render `bytes` for `t`: only what the bytes are, within the pixel limit and the deadline. */
  async #render(bytes: Buffer, t: Transform): Promise<{ data: Buffer; info: { format: string } }> {
    const format: SourceFormat | null = sniffImage(bytes);
    if (format === null) throw TRANSFORM_ERRORS.unsupported(); // SVG, TIFF, HEIC…: whatever the stored type says
    const sharp = await loadSharp();
    const options = { limitInputPixels: this.#maxPixels, failOn: 'error', sequentialRead: true } as const;
    let meta;
    try {
      meta = await sharp(bytes, options).metadata(); // the header only: no pixel is decoded
    } catch (err) {
      throw overLimit(err) ? TRANSFORM_ERRORS.tooLarge() : TRANSFORM_ERRORS.unsupported();
    }
    if (!headerAgrees(format, meta)) throw TRANSFORM_ERRORS.unsupported();
    if (headerPixels(meta) > this.#maxPixels) throw TRANSFORM_ERRORS.tooLarge();
    try {
      let img = sharp(bytes, options).timeout({ seconds: RENDER_SECONDS }).rotate();
      if (t.width !== null || t.height !== null) {
        const fit = t.resize === 'contain' ? 'inside' : t.resize;
        img = img.resize(t.width ?? undefined, t.height ?? undefined, { fit, withoutEnlargement: false });
      }
      const out = t.format === 'origin' ? format : t.format;
      if (out === 'webp') img = img.webp({ quality: t.quality });
      else if (out === 'avif') img = img.avif({ quality: t.quality });
      else if (out === 'jpeg') img = img.jpeg({ quality: t.quality });
      else if (out === 'png') img = img.png();
      else img = img.gif();
      return await img.toBuffer({ resolveWithObject: true });
    } catch (err) {
      // Past the deadline or the limit: too costly to render; otherwise not an image sharp can read.
      throw overLimit(err) || /timeout/i.test(String(err)) ? TRANSFORM_ERRORS.tooLarge() : TRANSFORM_ERRORS.unsupported();
    }
  }

  /** Variants kept for one object. */
  async #count(dir: string): Promise<number> {
    try {
      return (await readdir(dir)).filter((n) => /^[0-9a-f]{16}\.[a-z]+$/.test(n)).length;
    } catch {
      return 0;
    }
  }

  async #find(dir: string, key: string): Promise<Variant | null> {
    for (const ext of ['webp', 'avif', 'jpeg', 'png', 'gif']) {
      const path = join(dir, `${key}.${ext}`);
      try {
        const s = await stat(path);
        return { path, size: s.size, contentType: OUT_TYPES[ext], key: `${dir.slice(-36).replaceAll('-', '')}-${key}` };
      } catch {
        // not this one
      }
    }
    return null;
  }

  open(v: Variant): Readable {
    return createReadStream(v.path, { highWaterMark: 256 * 1024 });
  }

  /** Remove the variants of objects that no longer exist. */
  async sweep(sql: Sql): Promise<number> {
    let ids: string[];
    try {
      ids = (await readdir(this.#dir)).filter((n) => /^[0-9a-f-]{36}$/.test(n));
    } catch {
      return 0;
    }
    if (ids.length === 0) return 0;
    const live = new Set((await sql<{ id: string }[]>`select id::text from storage.objects where id = any(${ids}::uuid[])`).map((r) => r.id));
    let n = 0;
    for (const id of ids) {
      if (!live.has(id)) {
        await rm(join(this.#dir, id), { recursive: true, force: true });
        n++;
      }
    }
    return n;
  }
}
