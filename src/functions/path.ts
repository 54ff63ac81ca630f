/**
 * The path a deno function call is forwarded with: `/<name>[/suffix][?query]`, built from
 * the request line as received, so that the runtime serves exactly the function whose
 * catalog row was checked.
 *
 * Each suffix segment is percent-decoded once and refused with 400 `invalid function path`
 * when it is `.` or `..` (raw or percent-encoded, any case, mixed like `.%2e`), holds a
 * slash or a backslash once decoded (`%2f`, `%5c`, or a raw `\`, which URL parsers treat
 * as a separator) or holds a malformed escape. A URL parser on the runtime's side would
 * otherwise resolve `/<name>/../<other>` to `/<other>`. Every segment that passes is
 * encoded again (only what a path segment must escape), so the runtime decodes exactly
 * what was checked here. The query string goes on as received.
 */
import { AppError } from '../core/errors.ts';

export const invalidFunctionPath = () => new AppError(400, 'invalid function path');

const PREFIX = '/functions/v1/';

/** Characters a path segment may hold unescaped (RFC 3986 pchar) that encodeURIComponent escapes. */
const PCHAR_ESCAPED = /%(24|26|2B|2C|3A|3B|3D|40)/g;

/** Unreserved characters only: a segment that encodes to itself (a function's name, mostly). */
const UNRESERVED = /^[A-Za-z0-9._~-]*$/;

/** One decoded segment, encoded for a path: everything but unreserved characters and pchar delimiters escaped. */
export function encodeSegment(segment: string): string {
  if (UNRESERVED.test(segment)) return segment;
  return encodeURIComponent(segment).replace(PCHAR_ESCAPED, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/** A decoded suffix segment a runtime cannot mistake for a step up or a separator. */
function segmentOk(segment: string): boolean {
  return segment !== '.' && segment !== '..' && !segment.includes('/') && !segment.includes('\\');
}

/**
 * `/<name>[/suffix][?query]` for the runtime, from the raw request URL
 * (`/functions/v1/<name>[/suffix][?query]`) and the function's (decoded) name. Throws 400
 * `invalid function path`.
 */
export function functionPath(url: string, name: string): string {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  const query = q < 0 ? '' : url.slice(q);
  if (!path.startsWith(PREFIX) || !segmentOk(name)) throw invalidFunctionPath();
  const segments = path.slice(PREFIX.length).split('/');
  // segments[0] is the name as sent; fastify decoded it to `name`, encoded again below.
  let out = '/' + encodeSegment(name);
  for (let i = 1; i < segments.length; i++) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segments[i]);
    } catch {
      throw invalidFunctionPath();
    }
    if (!segmentOk(decoded)) throw invalidFunctionPath();
    out += '/' + encodeSegment(decoded);
  }
  return out + query;
}
