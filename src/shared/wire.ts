/**
 * The JSON objects the server sends and the client library receives, declared once: the
 * auth area builds them (src/auth) and the client types its answers with them (src/client,
 * shipped in @plinth/client's declarations). Types only: no code, no imports, so both sides
 * can take it (docs/api/auth.md, "Objects").
 */

/** The User object (built in SQL by `auth_private.user_json`). */
export interface User {
  id: string;
  email: string | null;
  role: string;
  user_metadata: Record<string, unknown>;
  created_at: string;
  updated_at: string;
  /** OAuth users only. */
  provider?: string;
  /** Users with a phone number only (E.164). */
  phone?: string;
}

/** The Session: what sign-up, sign-in, refresh and guest sign-in answer. */
export interface Session {
  access_token: string;
  /** Opaque; rotated on every refresh. */
  refresh_token: string;
  /** Seconds the access token lives from now. */
  expires_in: number;
  token_type: 'bearer';
  user: User;
}
