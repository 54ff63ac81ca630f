/**
 * The credential a `function:` target of a schedule or a queue is called with: a short-lived
 * HS256 token whose role is `service_role` and whose claim `schedule` (or `queue`) names the
 * caller, never the ten-year service-role key, which a function (or a dependency of it, or
 * its logs) could otherwise keep and use for years.
 *
 * A token lives RUN_TOKEN_TTL_S plus the run's timeout, so it outlives every call it is
 * given to (a function may call plinth back until its last moment); one is kept per
 * schedule or queue and given to later runs while at least the run's timeout plus a minute
 * of it remains (a busy queue signs about one token every four minutes, and plinth verifies
 * each once).
 */
import { signClaims } from '../auth/tokens.ts';

/** Five minutes, on top of the run's timeout. */
export const RUN_TOKEN_TTL_S = 300;
/** What must be left of a token, beyond the run's timeout, for it to be given to a run. */
const LEFT_S = 60;

interface Minted {
  token: string;
  exp: number;
}

export class RunTokens {
  readonly #secret: string;
  readonly #kept = new Map<string, Minted>();

  constructor(secret: string) {
    this.#secret = secret;
  }

  /** A token for a run of `kind` `name` that may take up to `timeoutMs`. */
  async get(kind: 'schedule' | 'queue', name: string, timeoutMs: number, now = Math.floor(Date.now() / 1000)): Promise<string> {
    const key = `${kind}:${name}`;
    const timeoutS = Math.ceil(timeoutMs / 1000);
    const kept = this.#kept.get(key);
    if (kept !== undefined && kept.exp - now >= timeoutS + LEFT_S) return kept.token;
    const exp = now + RUN_TOKEN_TTL_S + timeoutS;
    const token = await signClaims(this.#secret, { role: 'service_role', [kind]: name, iat: now, exp });
    this.#kept.set(key, { token, exp });
    return token;
  }
}
