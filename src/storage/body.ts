/** Request bodies in the raw scope of the object routes, where no body parser runs. */
import type { FastifyRequest } from 'fastify';
import { ERRORS } from '../core/errors.ts';

/** Read a request body to its end, at most `limit` bytes (413 past it). */
export async function readBody(req: FastifyRequest, limit: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const chunk of req.raw as AsyncIterable<Buffer>) {
    n += chunk.length;
    if (n > limit) throw ERRORS.bodyTooLarge();
    parts.push(chunk);
  }
  return Buffer.concat(parts, n);
}

/** Discard a body nobody needs (a POST that signs). */
export async function drain(req: FastifyRequest): Promise<void> {
  await readBody(req, 64 * 1024);
}

/**
 * A JSON object body in the raw scope (where no parser runs: an upload's bytes are never
 * parsed): MAX_BODY_BYTES, then JSON, else 400 `invalid request body`. An empty body is `{}`.
 */
export async function jsonBody(req: FastifyRequest, limit: number): Promise<Record<string, unknown>> {
  const buf = await readBody(req, limit);
  if (buf.length === 0) return {};
  let v: unknown;
  try {
    v = JSON.parse(buf.toString('utf8'));
  } catch {
    throw ERRORS.invalidBody();
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw ERRORS.invalidBody();
  return v as Record<string, unknown>;
}
