/**
 * An object's type (docs/api/storage.md) and the headers its download carries, so that a file a
 * user uploads never runs as a page of the API's origin.
 *
 * The stored type: the declared one (the multipart part's or the body's Content-Type), else
 * the one its extension names, else application/octet-stream. It is kept as `type/subtype`
 * and at most a charset: a browser reads a Content-Type such as `text/plain;a=b, text/html`
 * as HTML, so what plinth stores is what a browser will read. A declared type that a known
 * extension contradicts gives way to the extension's type when either of the two is a type
 * a browser runs (HTML, XHTML, SVG, XML, JavaScript): `evil.png` declared `text/html` is
 * stored as image/png, `evil.html` declared `image/png` as text/html (and a bucket's
 * allowed_mime_types judges that type). Uploads are not refused for it: clients that send a
 * default type for every body still succeed.
 *
 * Every download (any bucket, ranges, HEAD, 304) says `X-Content-Type-Options: nosniff` and
 * `Content-Security-Policy: default-src 'none'; sandbox`; a type a browser runs is also sent
 * as `Content-Disposition: attachment` with the object's file name.
 */
import { extname } from 'node:path';
import mime from 'mime-types';

/** Content types that say nothing about the bytes: the extension decides instead. */
const UNSPECIFIED_TYPES = new Set(['application/octet-stream', 'application/x-www-form-urlencoded', '']);
const TOKEN_TYPE = /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/;
const CHARSET = /^[A-Za-z0-9!#$%&'+^_`{}~.-]{1,40}$/;

/** Types a browser runs script in, or renders as a document that can: served as attachments. */
const ACTIVE_TYPES = new Set([
  'text/html',
  'application/xhtml+xml',
  'image/svg+xml',
  'text/xml',
  'application/xml',
  'text/xsl',
  'multipart/x-mixed-replace',
]);

export const DOWNLOAD_HEADERS = {
  'x-content-type-options': 'nosniff',
  'content-security-policy': "default-src 'none'; sandbox",
} as const;

/** `type/subtype`, lower-case, without parameters. */
function essence(type: string): string {
  return type.split(';')[0].trim().toLowerCase();
}

/** true for a type a browser may run script in: HTML, XHTML, SVG, XML (any `+xml`), JavaScript. */
export function runsInBrowser(type: string): boolean {
  const e = essence(type);
  return ACTIVE_TYPES.has(e) || e.endsWith('+xml') || /(?:java|ecma|j|live|vb)script/.test(e);
}

/** `type/subtype[; charset=x]` of a Content-Type, or null when it is not one. */
export function normalizeType(given: string): string | null {
  const parts = given.split(';');
  const e = essence(given);
  if (!TOKEN_TYPE.test(e)) return null;
  for (const p of parts.slice(1)) {
    const eq = p.indexOf('=');
    if (eq < 0 || p.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    const value = p.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1');
    return CHARSET.test(value) ? `${e}; charset=${value}` : e;
  }
  return e;
}

/** The last path segment's extension, lower-case, without the dot ('' when none). */
function extensionOf(name: string): string {
  const last = name.slice(name.lastIndexOf('/') + 1);
  return extname(last).slice(1).toLowerCase();
}

/** The stored MIME type of an upload (see the file comment). */
export function pickMimeType(given: string | null | undefined, name: string): string {
  const ext = extensionOf(name);
  const byName = (ext !== '' && mime.lookup(ext)) || null;
  const declared = normalizeType((given ?? '').trim());
  if (declared === null || UNSPECIFIED_TYPES.has(essence(declared))) return byName ?? 'application/octet-stream';
  const e = essence(declared);
  if (byName !== null && byName !== e && !(mime.extensions[e] ?? []).includes(ext) && (runsInBrowser(e) || runsInBrowser(byName))) {
    return byName;
  }
  return declared;
}

/** `attachment` with the object's file name: quoted ASCII, and RFC 5987 UTF-8 for the rest. */
export function attachment(name: string): string {
  const file = name.slice(name.lastIndexOf('/') + 1);
  const ascii = file.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const utf8 = encodeURIComponent(file).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${utf8}`;
}

/**
 * Headers of every download of an object stored as `type` under `name`: its Content-Type
 * (stored types from before the rule above are normalised the same way), nosniff, the
 * sandboxing CSP, and an attachment disposition for a type a browser runs.
 */
export function downloadHeaders(type: string, name: string): Record<string, string> {
  const contentType = normalizeType(type) ?? 'application/octet-stream';
  const out: Record<string, string> = { ...DOWNLOAD_HEADERS, 'content-type': contentType };
  if (runsInBrowser(contentType)) out['content-disposition'] = attachment(name);
  return out;
}
