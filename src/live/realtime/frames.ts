/**
 * Phoenix channel frames as realtime-js 2.x sends and reads them (docs/api/realtime.md).
 *
 * - vsn 1.0.0: a text frame is a JSON object `{join_ref, ref, topic, event, payload}`.
 * - vsn 2.0.0: a text frame is a JSON array `[join_ref, ref, topic, event, payload]`; a
 *   client's broadcast may come as a binary frame (kind 3, "user broadcast push": a header
 *   of lengths, then join_ref, ref, topic, event, metadata and the payload, JSON or bytes),
 *   and a broadcast to a client goes as a binary frame (kind 4, "user broadcast": topic,
 *   event, metadata, payload).
 */

export type Vsn = '1.0.0' | '2.0.0';

export interface Frame {
  join_ref: string | null;
  ref: string | null;
  topic: string;
  event: string;
  payload: unknown;
}

const KIND_PUSH = 3;
const KIND_BROADCAST = 4;
const ENCODING_BINARY = 0;
const ENCODING_JSON = 1;

function str(v: unknown): string | null {
  return typeof v === 'string' ? v : typeof v === 'number' ? String(v) : null;
}

/** A text frame, or null when it is not one of this version's shape. */
export function decodeText(vsn: Vsn, text: string): Frame | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return null;
  }
  let parts: unknown[];
  if (vsn === '2.0.0') {
    if (!Array.isArray(raw) || raw.length !== 5) return null;
    parts = raw;
  } else {
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return null;
    const o = raw as Record<string, unknown>;
    parts = [o.join_ref, o.ref, o.topic, o.event, o.payload];
  }
  const [joinRef, ref, topic, event, payload] = parts;
  if (typeof topic !== 'string' || typeof event !== 'string') return null;
  return { join_ref: str(joinRef), ref: str(ref), topic, event, payload: payload ?? {} };
}

/**
 * A binary frame (vsn 2.0.0): a client's broadcast push, as the frame `broadcast` with the
 * payload `{type: broadcast, event, payload}` a text frame would carry; null otherwise.
 */
export function decodeBinary(buf: Buffer): Frame | null {
  if (buf.length < 7 || buf[0] !== KIND_PUSH) return null;
  const [joinRefLen, refLen, topicLen, eventLen, metaLen, encoding] = [buf[1], buf[2], buf[3], buf[4], buf[5], buf[6]];
  let at = 7;
  const take = (n: number) => {
    const s = buf.toString('utf8', at, at + n);
    at += n;
    return s;
  };
  if (at + joinRefLen + refLen + topicLen + eventLen + metaLen > buf.length) return null;
  const joinRef = take(joinRefLen);
  const ref = take(refLen);
  const topic = take(topicLen);
  const event = take(eventLen);
  take(metaLen);
  let payload: unknown;
  if (encoding === ENCODING_JSON) {
    try {
      payload = JSON.parse(buf.toString('utf8', at));
    } catch {
      return null;
    }
  } else if (encoding === ENCODING_BINARY) {
    // Bytes cannot cross PostgreSQL's notifications as they are: sent on as base64 text.
    payload = { base64: buf.subarray(at).toString('base64') };
  } else {
    return null;
  }
  return { join_ref: joinRef || null, ref: ref || null, topic, event: 'broadcast', payload: { type: 'broadcast', event, payload } };
}

/** A text frame of this version. */
export function encode(vsn: Vsn, f: Frame): string {
  return vsn === '2.0.0'
    ? JSON.stringify([f.join_ref, f.ref, f.topic, f.event, f.payload])
    : JSON.stringify({ join_ref: f.join_ref, ref: f.ref, topic: f.topic, event: f.event, payload: f.payload });
}

/** The frame of a broadcast to a client: binary (kind 4, JSON payload) in vsn 2.0.0, else text. */
export function encodeBroadcast(vsn: Vsn, topic: string, event: string, payloadJson: string): string | Buffer {
  if (vsn !== '2.0.0') {
    return `{"join_ref":null,"ref":null,"topic":${JSON.stringify(topic)},"event":"broadcast","payload":{"type":"broadcast","event":${JSON.stringify(event)},"payload":${payloadJson}}}`;
  }
  const t = Buffer.from(topic);
  const e = Buffer.from(event);
  if (t.length > 255 || e.length > 255) {
    return JSON.stringify([null, null, topic, 'broadcast', { type: 'broadcast', event, payload: JSON.parse(payloadJson) as unknown }]);
  }
  const header = Buffer.from([KIND_BROADCAST, t.length, e.length, 0, ENCODING_JSON]);
  return Buffer.concat([header, t, e, Buffer.from(payloadJson)]);
}

/**
 * A `postgres_changes` push whose `data` is already JSON text: one change goes to many
 * channels with the same data, serialised once (the same frame as encode builds).
 */
export function encodeChange(vsn: Vsn, topic: string, joinRef: string | null, ids: readonly number[], dataJson: string): string {
  const payload = `{"ids":${JSON.stringify(ids)},"data":${dataJson}}`;
  return vsn === '2.0.0'
    ? `[${JSON.stringify(joinRef)},null,${JSON.stringify(topic)},"postgres_changes",${payload}]`
    : `{"join_ref":${JSON.stringify(joinRef)},"ref":null,"topic":${JSON.stringify(topic)},"event":"postgres_changes","payload":${payload}}`;
}

/** A reply to a client's push. */
export function reply(vsn: Vsn, f: Frame, status: 'ok' | 'error', response: unknown): string {
  return encode(vsn, { join_ref: f.join_ref, ref: f.ref, topic: f.topic, event: 'phx_reply', payload: { status, response } });
}
