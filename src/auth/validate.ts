/**
 * Input rules of docs/api/auth.md and docs/api/overview.md: email addresses and password length.
 *
 * Email: RFC 5321/5322 addr-spec as mail servers accept it, plus RFC 6531 (UTF-8 local
 * parts) and IDNA domains. Accepted: dot-atom local parts with every atext character
 * (`o'brien`, `a+tag`, `x/y=z`, `{}`…), quoted local parts (`"john doe"`), non-ASCII
 * (`jörg@bücher.de`), address literals (`[192.0.2.1]`, `[IPv6:2001:db8::1]`).
 * Rejected: no or several unquoted `@`, empty/leading/trailing/double dots, whitespace or
 * control characters outside quotes, local part over 64 octets, whole address over 254,
 * domains without a dot (an address on the public internet needs one), labels over 63
 * octets, starting or ending with `-`, or with characters a hostname cannot have, and an
 * all-numeric top-level label.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { domainToASCII } from 'node:url';
import { AppError } from '../core/errors.ts';

const ATOM = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-\u{80}-\u{10FFFF}]+$/u;
const QUOTED = /^"(?:[\x20\x21\x23-\x5b\x5d-\x7e\u{80}-\u{10FFFF}]|\\[\x20-\x7e])*"$/u;
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

function validLocal(local: string): boolean {
  if (local === '' || Buffer.byteLength(local, 'utf8') > 64) return false;
  if (local.startsWith('"')) return QUOTED.test(local) && local.length > 2;
  return local.split('.').every((atom) => ATOM.test(atom));
}

function validDomain(domain: string): number {
  if (domain.startsWith('[') && domain.endsWith(']')) {
    const literal = domain.slice(1, -1);
    if (isIPv4(literal)) return domain.length;
    if (/^IPv6:/i.test(literal) && isIPv6(literal.slice(5))) return domain.length;
    return -1;
  }
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  if (/[\s\u0000-\u001f\u007f]/u.test(domain) || domain.endsWith('.')) return -1;
  const ascii = domainToASCII(domain);
  if (ascii === '' || ascii.length > 253) return -1;
  const labels = ascii.split('.');
  if (labels.length < 2 || !labels.every((l) => LABEL.test(l))) return -1;
  if (/^\d+$/.test(labels[labels.length - 1])) return -1;
  return ascii.length;
}

export function isValidEmail(email: string): boolean {
  if (email.length > 320) return false;
  // The domain cannot contain `@`; a quoted local part can, so split at the last one.
  const at = email.lastIndexOf('@');
  if (at <= 0 || at === email.length - 1) return false;
  const local = email.slice(0, at);
  const domainLength = validDomain(email.slice(at + 1));
  if (domainLength < 0 || !validLocal(local)) return false;
  return Buffer.byteLength(local, 'utf8') + 1 + domainLength <= 254;
}

export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 256;

/** Characters are Unicode code points, so an emoji counts once. */
export function passwordLength(password: string): number {
  let n = 0;
  for (const _ of password) n++;
  return n;
}

/** 400 for a password outside 8–256 characters; null when it is acceptable. */
export function passwordProblem(password: string): AppError | null {
  const n = passwordLength(password);
  if (n < PASSWORD_MIN) return new AppError(400, `password must be at least ${PASSWORD_MIN} characters`);
  if (n > PASSWORD_MAX) return new AppError(400, `password must be at most ${PASSWORD_MAX} characters`);
  return null;
}

export function checkPassword(password: string): void {
  const problem = passwordProblem(password);
  if (problem) throw problem;
}

export function checkEmail(email: string): void {
  if (!isValidEmail(email)) throw new AppError(400, 'invalid email address');
}
