/**
 * A store function's json result: node-postgres parses json columns itself, PGlite (through its
 * worker) hands them over as text. Every reader of a function's result goes through here.
 */
export function jsonResult<T>(value: T | string): T {
  return typeof value === 'string' ? (JSON.parse(value) as T) : value;
}
