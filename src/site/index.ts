/**
 * The application's front end, as PocketBase serves `pb_public/`: the files of PUBLIC_DIR
 * (default ./public when it exists) at `/`, with their types, revalidated caching (ETag,
 * Last-Modified, 304) and the single-page-app fallback (a page address with no file behind
 * it answers index.html). API paths keep their JSON 404. With no such folder, `/` is a small
 * page that says what runs here and links to the health check and the REST description;
 * it carries no key or secret.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname, join, sep } from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import mime from 'mime-types';
import type { Area } from '../core/area.ts';
import { ERRORS } from '../core/errors.ts';
import { sendError } from '../core/http.ts';

/** Paths that belong to the API: never a file, never the fallback. */
const API_PREFIXES = ['/auth/', '/rest/', '/storage/', '/functions/', '/ws/', '/api/', '/health'];

const LANDING = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>plinth</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;color:#222}code{background:#f3f3f3;padding:0 .2em}</style>
</head><body>
<h1>plinth is running</h1>
<p>Accounts, REST, RPC, storage, functions, webhooks and live queries over PostgreSQL.</p>
<ul>
<li><a href="/health">/health</a> — is the service up, does its database answer</li>
<li><a href="/rest/v1/">/rest/v1/</a> — the OpenAPI description of your tables and functions (send the anon key as <code>apikey</code>)</li>
</ul>
<p>To serve your own front end here, put its files in <code>./public</code> (or set <code>PUBLIC_DIR</code>) and restart.</p>
</body></html>
`;

interface Found {
  path: string;
  size: number;
  mtime: Date;
}

async function file(path: string): Promise<Found | null> {
  try {
    const st = await stat(path);
    return st.isFile() ? { path, size: st.size, mtime: st.mtime } : null;
  } catch {
    return null;
  }
}

/** The file under root that a URL path names, or null (dot segments, dotfiles and NUL never resolve). */
function resolveUnder(root: string, urlPath: string): string | null {
  let decoded: string;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return null;
  }
  const segments = decoded.split('/').filter(Boolean);
  if (segments.some((s) => s.startsWith('.') || s.includes('\\') || s.includes('\0'))) return null;
  const full = join(root, ...segments);
  return full === root || full.startsWith(root + sep) ? full : null;
}

function send(req: FastifyRequest, reply: FastifyReply, f: Found, html = false): FastifyReply {
  const etag = `W/"${f.size.toString(16)}-${Math.floor(f.mtime.getTime()).toString(16)}"`;
  const type = html ? 'text/html; charset=utf-8' : (mime.contentType(extname(f.path)) || 'application/octet-stream');
  reply
    .header('etag', etag)
    .header('last-modified', f.mtime.toUTCString())
    // Revalidated on every use: a new deploy is seen at once, an unchanged file costs a 304.
    .header('cache-control', 'no-cache')
    .header('x-content-type-options', 'nosniff');
  const inm = req.headers['if-none-match'];
  if (inm !== undefined && inm.split(',').some((t) => t.trim() === etag)) return reply.code(304).send();
  reply.code(200).type(type).header('content-length', f.size);
  return reply.send(createReadStream(f.path)); // HEAD: fastify sends the headers alone
}

export const siteArea: Area = {
  name: 'site',
  register(app, { config }) {
    const root = config.publicDir;
    if (root === null) {
      app.get('/', (_req, reply) => reply.code(200).type('text/html; charset=utf-8').header('cache-control', 'no-cache').send(LANDING));
      return;
    }
    const serve = async (req: FastifyRequest, reply: FastifyReply) => {
      const urlPath = (req.url.split('?')[0] ?? '/') || '/';
      if (API_PREFIXES.some((p) => urlPath === p.replace(/\/$/, '') || urlPath.startsWith(p))) return sendError(reply, ERRORS.notFound());
      const target = resolveUnder(root, urlPath);
      if (target === null) return sendError(reply, ERRORS.notFound());
      const found = (await file(target)) ?? (await file(join(target, 'index.html')));
      if (found) return send(req, reply, found, found.path.endsWith('.html'));
      // The single-page-app fallback: a page address (no extension) a browser asks for.
      const wantsHtml = (req.headers.accept ?? '').includes('text/html');
      if (wantsHtml && extname(urlPath) === '') {
        const index = await file(join(root, 'index.html'));
        if (index) return send(req, reply, index, true);
      }
      return sendError(reply, ERRORS.notFound());
    };
    app.get('/', serve);
    app.get('/*', serve);
  },
};
