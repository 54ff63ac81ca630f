/**
 * Password hashing: argon2id with the OWASP Password Storage Cheat Sheet's first
 * recommendation (m = 19456 KiB, t = 2, p = 1). Hashing runs on libuv's thread pool, off
 * the event loop and off the database.
 *
 * Sign-in with an unknown address (or an account without a password) verifies against a
 * dummy hash made with the same parameters, so both cost one argon2 verification and the
 * answer time does not tell whether an address is registered (no enumeration).
 */
import * as argon2 from 'argon2';
import { randomBytes } from 'node:crypto';

export const ARGON2_OPTIONS = Object.freeze({
  type: argon2.argon2id,
  memoryCost: 19456,
  timeCost: 2,
  parallelism: 1,
});

export function hashPassword(password: string): Promise<string> {
  return argon2.hash(password, ARGON2_OPTIONS);
}

let dummy: Promise<string> | null = null;

/** The dummy hash (made once per process, with a random password nobody knows). */
export function dummyHash(): Promise<string> {
  dummy ??= hashPassword(randomBytes(24).toString('base64url'));
  return dummy;
}

/**
 * true when `password` matches `hash`. With `hash` null it verifies against the dummy hash
 * and answers false, at the same cost.
 */
export async function verifyPassword(hash: string | null, password: string): Promise<boolean> {
  if (hash === null) {
    await argon2.verify(await dummyHash(), password).catch(() => false);
    return false;
  }
  try {
    return await argon2.verify(hash, password);
  } catch {
    return false; // a malformed stored hash never matches
  }
}

/** true when a stored hash was made with other parameters than today's. */
export function needsRehash(hash: string): boolean {
  try {
    return argon2.needsRehash(hash, { memoryCost: ARGON2_OPTIONS.memoryCost, timeCost: ARGON2_OPTIONS.timeCost, parallelism: ARGON2_OPTIONS.parallelism });
  } catch {
    return false;
  }
}
