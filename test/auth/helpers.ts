/**
 * Helpers for the auth tests: a real SMTP receiver (smtp-server on a loopback port), JWT
 * payload decoding, and sign-up shortcuts over real HTTP.
 */
import { SMTPServer } from 'smtp-server';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { startApp, type StartOptions, type TestApp } from '../helpers/app.ts';

interface TapLike {
  teardown(fn: () => unknown): void;
}

export interface ReceivedMail {
  from: string;
  to: string[];
  subject: string;
  /** Decoded plain-text body (the text/plain part of a multipart mail). */
  text: string;
  /** The decoded text/html part (null: a text-only mail). */
  html: string | null;
  raw: string;
}

export interface SmtpReceiver {
  url: string;
  port: number;
  mails: ReceivedMail[];
  /** The next mail to `to` not yet taken by `next`; rejects after `timeoutMs`. */
  next(to: string, timeoutMs?: number): Promise<ReceivedMail>;
}

function decodeQuotedPrintable(s: string): Buffer {
  const soft = s.replace(/=\r?\n/g, '');
  const bytes: number[] = [];
  for (let i = 0; i < soft.length; i++) {
    const c = soft[i];
    if (c === '=' && /^[0-9A-Fa-f]{2}$/.test(soft.slice(i + 1, i + 3))) {
      bytes.push(parseInt(soft.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(c, 'utf8'));
    }
  }
  return Buffer.from(bytes);
}

function decodePart(raw: string): { type: string; head: (name: string) => string; body: string; parts: string[] } {
  const split = raw.indexOf('\r\n\r\n');
  const headText = raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ');
  const bodyRaw = raw.slice(split + 4);
  const head = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'im').exec(headText)?.[1]?.trim() ?? '';
  const type = head('Content-Type').toLowerCase();
  const boundary = /boundary="?([^";]+)"?/i.exec(head('Content-Type'))?.[1];
  if (type.startsWith('multipart/') && boundary !== undefined) {
    const parts = bodyRaw.split(`--${boundary}`).slice(1).filter((p) => !p.startsWith('--')).map((p) => p.replace(/^\r\n/, '').replace(/\r\n$/, ''));
    return { type, head, body: '', parts };
  }
  const cte = head('Content-Transfer-Encoding').toLowerCase();
  let body: string;
  if (cte === 'quoted-printable') body = decodeQuotedPrintable(bodyRaw).toString('utf8');
  else if (cte === 'base64') body = Buffer.from(bodyRaw.replace(/\s+/g, ''), 'base64').toString('utf8');
  else body = bodyRaw;
  return { type, head, body: body.replace(/\r\n/g, '\n'), parts: [] };
}

/** A received mail: its subject, and its text and HTML parts (multipart/alternative or a single part). */
export function parseMail(raw: string, envelope: { from: string; to: string[] }): ReceivedMail {
  const top = decodePart(raw);
  let text: string | null = null;
  let html: string | null = null;
  const walk = (p: ReturnType<typeof decodePart>) => {
    if (p.parts.length > 0) for (const sub of p.parts) walk(decodePart(sub));
    else if (p.type.startsWith('text/html')) html ??= p.body;
    else text ??= p.body;
  };
  walk(top);
  // RFC 2047 encoded words (a subject beyond ASCII), adjacent ones joined.
  const subject = top.head('Subject').replace(/\?=\s+=\?/g, '?==?').replace(/=\?([^?]+)\?([QqBb])\?([^?]*)\?=/g, (_all, _cs: string, enc: string, data: string) =>
    enc.toUpperCase() === 'B' ? Buffer.from(data, 'base64').toString('utf8') : decodeQuotedPrintable(data.replace(/_/g, ' ')).toString('utf8'));
  return { from: envelope.from, to: envelope.to, subject, text: text ?? '', html, raw };
}

/** A real SMTP receiver on a loopback port (`port`: a given one, e.g. one a test left closed at first). */
export async function startSmtp(t: TapLike, port0 = 0): Promise<SmtpReceiver> {
  const mails: ReceivedMail[] = [];
  const taken = new Set<ReceivedMail>();
  const waiters = new Set<() => void>();
  const server = new SMTPServer({
    authOptional: true,
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const envelope = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
        };
        mails.push(parseMail(Buffer.concat(chunks).toString('utf8'), envelope));
        for (const w of waiters) w();
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(port0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    mails,
    next(to, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = mails.find((x) => !taken.has(x) && x.to.includes(to));
          if (m) {
            taken.add(m);
            waiters.delete(check);
            clearTimeout(timer);
            resolve(m);
            return true;
          }
          return false;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no mail to ${to} within ${timeoutMs} ms`));
        }, timeoutMs);
        if (!check()) waiters.add(check);
      });
    },
  };
}

/** The single link of a mail body (contract §4: exactly one). */
export function linksOf(text: string): string[] {
  return text.match(/https?:\/\/\S+/g) ?? [];
}

export function tokenOfLink(link: string): string {
  const token = new URL(link).searchParams.get('token');
  if (!token) throw new Error(`no token in ${link}`);
  return token;
}

/** The payload of a JWT, without verifying it. */
export function jwtPayload(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8')) as Record<string, unknown>;
}

export function uniqueEmail(prefix = 'user'): string {
  return `${prefix}-${randomBytes(5).toString('hex')}@example.com`;
}

export const PASSWORD = 'correct horse battery';

/** An app with the rate limit off (most tests do not test it). */
export function startAuthApp(t: TapLike, opts: StartOptions = {}): Promise<TestApp> {
  return startApp(t, { ...opts, env: { AUTH_RATE_LIMIT: '0', ...opts.env } });
}

export async function signUp(app: TestApp, email = uniqueEmail(), password = PASSWORD, data?: Record<string, unknown>) {
  const r = await app.call('POST', '/auth/v1/signup', { body: { email, password, ...(data ? { data } : {}) } });
  if (r.status !== 201) throw new Error(`signup failed: ${r.status} ${r.text}`);
  return { email, password, session: r.body as Session };
}

export async function signIn(app: TestApp, email: string, password = PASSWORD) {
  return app.call('POST', '/auth/v1/token', { body: { grant_type: 'password', email, password } });
}

export async function refresh(app: TestApp, refreshToken: string) {
  return app.call('POST', '/auth/v1/token', { body: { grant_type: 'refresh_token', refresh_token: refreshToken } });
}

export interface Session {
  access_token: string;
  refresh_token: string;
  expires_in: number;
  token_type: string;
  user: { id: string; email: string | null; role: string; user_metadata: Record<string, unknown>; created_at: string; updated_at: string; provider?: string };
}

export const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
