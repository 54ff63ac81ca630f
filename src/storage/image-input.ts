/**
 * What a render source is, read from its bytes rather than from its stored type: the stored
 * type follows the name and the uploader's word, so an SVG (or a TIFF, a PDF, anything
 * libvips opens) named `v.png` would otherwise reach a decoder whose cost its author
 * chooses. Five formats pass: JPEG, PNG, WebP, AVIF and GIF, recognised by their magic
 * numbers; then sharp reads the header alone (no pixel decoded) and must agree on the
 * format, and width × height must stay within the pixel limit.
 */
import type { Metadata } from 'sharp';

export type SourceFormat = 'jpeg' | 'png' | 'webp' | 'avif' | 'gif';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const AVIF_BRANDS = new Set(['avif', 'avis']);

const ascii = (b: Buffer, from: number, to: number) => b.toString('latin1', from, to);

/** An ISO-BMFF `ftyp` box at the start naming an AVIF brand (major or compatible). */
function isAvif(b: Buffer): boolean {
  if (b.length < 16 || ascii(b, 4, 8) !== 'ftyp') return false;
  const size = b.readUInt32BE(0);
  if (size < 16 || size > 256 || size > b.length) return false;
  if (AVIF_BRANDS.has(ascii(b, 8, 12))) return true;
  for (let at = 16; at + 4 <= size; at += 4) if (AVIF_BRANDS.has(ascii(b, at, at + 4))) return true;
  return false;
}

/** The format the bytes are, by their magic number; null for anything else (SVG, TIFF, HEIC, PDF, text…). */
export function sniffImage(b: Buffer): SourceFormat | null {
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'jpeg';
  if (b.length >= 8 && b.subarray(0, 8).equals(PNG_SIGNATURE)) return 'png';
  if (b.length >= 6 && (ascii(b, 0, 6) === 'GIF87a' || ascii(b, 0, 6) === 'GIF89a')) return 'gif';
  if (b.length >= 12 && ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 12) === 'WEBP') return 'webp';
  if (isAvif(b)) return 'avif';
  return null;
}

/** Does sharp's reading of the header agree with the magic number? (AVIF is HEIF with AV1 inside; HEIC is refused.) */
export function headerAgrees(format: SourceFormat, meta: Metadata): boolean {
  if (format === 'avif') return meta.format === 'heif' && meta.compression === 'av1';
  return meta.format === format;
}

/** Pixels one frame of the source holds, by its header (animated sources render their first frame). */
export function headerPixels(meta: Metadata): number {
  const w = meta.width ?? 0;
  const h = meta.pageHeight ?? meta.height ?? 0;
  return w * h;
}
