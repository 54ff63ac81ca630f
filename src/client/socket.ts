/** The WebSocket the live queries and Realtime channels ride on: its parts the client uses, and how the token travels. */

/** The parts of a WebSocket the client uses (the browser's, Node's global, or `ws`). */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code?: number; reason?: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** The subprotocols that carry `token`: `plinth` (echoed by the server) and the token, base64url. */
export function bearerProtocols(token: string): string[] {
  let binary = '';
  for (const b of new TextEncoder().encode(token)) binary += String.fromCharCode(b);
  const encoded = btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  return ['plinth', `base64url.bearer.${encoded}`];
}
