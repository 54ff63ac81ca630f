/**
 * The caller a request resolved to (API role and user id), for its log lines (core/http.ts
 * names the role in the fix for a refused request, and the request log carries both). Set
 * where the credential is resolved; a request that never got that far has none.
 */
const callers = new WeakMap<object, { role: string; userId: string | null }>();

export function setRequestCaller(raw: object, caller: { role: string; userId: string | null }): void {
  callers.set(raw, caller);
}

export function requestRole(raw: object): string | undefined {
  return callers.get(raw)?.role;
}

export function requestUserId(raw: object): string | null {
  return callers.get(raw)?.userId ?? null;
}
