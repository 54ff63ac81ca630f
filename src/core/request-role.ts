/**
 * The API role a request resolved to, for its log line (core/http.ts names it in the fix
 * for a refused request). Set where the credential is resolved; a request that never got
 * that far has none.
 */
const roles = new WeakMap<object, string>();

export function setRequestRole(raw: object, role: string): void {
  roles.set(raw, role);
}

export function requestRole(raw: object): string | undefined {
  return roles.get(raw);
}
