import type { CompiledPath } from '../policy/index.js';
import { canonicalJson } from './canonical-json.js';

/**
 * Form fields and query parameters as Rails (Rack), PHP (Laravel) and Express' qs read them:
 * `fields[summary]=x` is `{ fields: { summary: "x" } }` and `tags[]=a` is `{ tags: ["a"] }`,
 * while Django, Flask, Go and Fastify keep one parameter literally named `fields[summary]`. The
 * gate reads forms flat; a key path that reads something else under the nested reading reads an
 * argument some destinations act on and others do not (see `refuseNestedReadings`).
 *
 * Names without `[` are kept as they are; a name whose brackets do not close is literal (as qs and
 * PHP keep it). Where two fields give one name both a value and members (`a=1&a[b]=2`, which Rails
 * refuses and PHP reads as the members), the name holds `CONFLICT`, which compares unequal to any
 * value a flat reading gives.
 */
export const CONFLICT: unique symbol = Symbol('nested parameters conflict');

const STEP = /\[([^[\]]*)\]/g;

export function nestedReading(fields: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [name, raw] of Object.entries(fields)) {
    for (const value of Array.isArray(raw) ? raw : [raw]) place(out, steps(name), value);
  }
  return out;
}

/** `a[b][]` → `['a', 'b', '']`; a name whose brackets do not parse is one literal step. */
function steps(name: string): string[] {
  const open = name.indexOf('[');
  if (open <= 0 || !name.endsWith(']')) return [name];
  const rest = name.slice(open);
  const found = [...rest.matchAll(STEP)];
  if (found.map((m) => m[0]).join('') !== rest) return [name];
  return [name.slice(0, open), ...found.map((m) => m[1]!)];
}

function place(into: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let at: Record<string, unknown> | unknown[] = into;
  for (let i = 0; i < path.length; i++) {
    const step = path[i]!;
    const last = i === path.length - 1;
    if (Array.isArray(at)) {
      if (step !== '') {
        markConflict(into, path[0]!);
        return;
      }
      if (last) at.push(value);
      else {
        const next = {};
        at.push(next);
        at = next;
      }
      continue;
    }
    const existing = Object.hasOwn(at, step) ? at[step] : undefined;
    if (last) {
      if (existing !== undefined) {
        // A repeat of a plain name keeps the last, as Rails and PHP do; members and a value clash.
        if (typeof existing === 'object' && existing !== null) {
          markConflict(into, path[0]!);
          return;
        }
      }
      define(at, step, value);
      return;
    }
    const wantsArray = path[i + 1] === '';
    if (existing === undefined) {
      const next = wantsArray ? [] : (Object.create(null) as Record<string, unknown>);
      define(at, step, next);
      at = next;
    } else if (typeof existing === 'object' && existing !== null && Array.isArray(existing) === wantsArray) {
      at = existing as Record<string, unknown> | unknown[];
    } else {
      markConflict(into, path[0]!);
      return;
    }
  }
}

function markConflict(into: Record<string, unknown>, name: string): void {
  define(into, name, CONFLICT);
}

function define(record: Record<string, unknown>, name: string, value: unknown): void {
  Object.defineProperty(record, name, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * The nested reading of `fields` (a parsed query, form or multipart body) when some name uses
 * bracket syntax, else null: without a bracket both readings are the same.
 */
export function bracketedReading(fields: unknown): Record<string, unknown> | null {
  if (fields === null || typeof fields !== 'object' || Array.isArray(fields)) return null;
  const record = fields as Record<string, unknown>;
  return Object.keys(record).some((n) => n.includes('[')) ? nestedReading(record) : null;
}

/**
 * The first of `paths` that reads something else over `nested` than over `flat`, or null. A
 * `CONFLICT` anywhere in what a path reads counts as different.
 */
export function firstDivergentPath(
  paths: readonly CompiledPath[],
  flat: unknown,
  nested: unknown,
): string | null {
  for (const path of paths) {
    const a = path.evaluate(flat);
    const b = path.evaluate(nested);
    if (b.some(hasConflict) || comparable(a) !== comparable(b)) return path.expression;
  }
  return null;
}

function hasConflict(value: unknown): boolean {
  if (value === CONFLICT) return true;
  if (value === null || typeof value !== 'object') return false;
  return Object.values(value).some(hasConflict);
}

function comparable(values: readonly unknown[]): string {
  return canonicalJson(values.filter((v) => v !== undefined));
}
