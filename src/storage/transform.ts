/**
 * Image transformations with sharp, as Supabase's `/render/image` routes serve them:
 * `width`, `height` (1–2500), `resize` (`cover`, `contain` — fit inside the box, no
 * padding — or `fill`), `quality` (20–100, default 80) and `format` (`origin`, `webp`,
 * `avif`; default `origin`). Sources: JPEG, PNG, WebP, AVIF or GIF of at most 25 MB.
 *
 * A variant is rendered once and kept under DATA_DIR/image-cache/<object id>/: every upload
 * (a replacement too) is a new object id, so a changed object never serves an old variant;
 * the sweep job removes the variants of objects that are gone.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { Sql } from '../core/db.ts';
import { AppError } from '../core/errors.ts';

export const MAX_SOURCE_BYTES = 25 * 1024 * 1024;
export const MAX_SIDE = 2500;
const SOURCES = new Set(['image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/gif']);
const OUT_TYPES: Record<string, string> = { jpeg: 'image/jpeg', png: 'image/png', webp: 'image/webp', avif: 'image/avif', gif: 'image/gif' };

export const TRANSFORM_ERRORS = {
  invalid: () => new AppError(400, 'invalid transformation'),
  disabled: () => new AppError(400, 'image transformation is disabled'),
  tooLarge: () => new AppError(413, 'image too large to transform'),
  unsupported: () => new AppError(415, 'image format not supported'),
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

export class ImageCache {
  readonly #dir: string;

  constructor(dataDir: string) {
    this.#dir = join(dataDir, 'image-cache');
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
    const input = await source();
    if (input === null) return null;
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const c of input as AsyncIterable<Buffer>) {
      n += c.length;
      if (n > MAX_SOURCE_BYTES) throw TRANSFORM_ERRORS.tooLarge();
      chunks.push(c);
    }
    const { default: sharp } = await import('sharp');
    let out: { data: Buffer; info: { format: string } };
    try {
      let img = sharp(Buffer.concat(chunks, n), { limitInputPixels: 100_000_000, failOn: 'error' }).rotate();
      if (t.width !== null || t.height !== null) {
        const fit = t.resize === 'contain' ? 'inside' : t.resize;
        img = img.resize(t.width ?? undefined, t.height ?? undefined, { fit, withoutEnlargement: false });
      }
      if (t.format === 'webp') img = img.webp({ quality: t.quality });
      else if (t.format === 'avif') img = img.avif({ quality: t.quality });
      else if (type === 'image/jpeg') img = img.jpeg({ quality: t.quality });
      else if (type === 'image/webp') img = img.webp({ quality: t.quality });
      else if (type === 'image/avif') img = img.avif({ quality: t.quality });
      out = await img.toBuffer({ resolveWithObject: true });
    } catch {
      throw TRANSFORM_ERRORS.unsupported(); // not an image sharp can read, whatever its type says
    }
    const ext = out.info.format === 'heif' ? 'avif' : out.info.format;
    await mkdir(dir, { recursive: true });
    const path = join(dir, `${key}.${ext}`);
    const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    await writeFile(tmp, out.data);
    await rename(tmp, path); // whole or absent, also when two requests render it at once
    return { path, size: out.data.length, contentType: OUT_TYPES[ext] ?? 'application/octet-stream', key: `${id.replaceAll('-', '')}-${key}` };
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
