/**
 * Freezes `value` and everything reachable from it (own properties of objects and arrays), so a
 * loaded policy cannot be changed by the code that reads it. Already-frozen objects are still
 * walked: a frozen container may hold unfrozen members.
 */
export function deepFreeze<T>(value: T, seen: Set<object> = new Set()): T {
  if (value === null || typeof value !== 'object' || seen.has(value)) return value;
  seen.add(value);
  for (const key of Reflect.ownKeys(value)) {
    deepFreeze((value as Record<PropertyKey, unknown>)[key], seen);
  }
  return Object.freeze(value);
}
