import type { Tool } from '../policy/index.js';
import type { Scope } from '../store/index.js';
import type { ArgumentDocument } from './argument-document.js';
import { canonicalJson, hmacRef, sha256Ref } from './canonical-json.js';

export type SemanticKey =
  | { readonly ok: true; readonly hash: string; readonly values: readonly unknown[] }
  | {
      readonly ok: false;
      readonly reason: 'key_path_missing' | 'key_value_invalid';
      readonly paths: readonly string[];
    };

const MAX_KEY_DEPTH = 32;

/**
 * Why a key value cannot stand for an effect, or `null` when it can. A value must survive the trip
 * to the store unchanged: integers past 2^53 have already been rounded by JSON.parse (two different
 * ids would collide into a false duplicate), non-finite numbers have no JSON form, and NUL or lone
 * surrogates are refused by PostgreSQL's jsonb.
 */
export function keyValueProblem(value: unknown, depth = 0): string | null {
  if (depth > MAX_KEY_DEPTH) return 'nested too deeply';
  switch (typeof value) {
    case 'number':
      if (!Number.isFinite(value)) return 'not a finite number';
      if (Number.isInteger(value) && !Number.isSafeInteger(value))
        return 'an integer beyond 2^53 (send it as a string)';
      return null;
    case 'string':
      if (value.includes('\u0000')) return 'contains a NUL character';
      if (!value.isWellFormed()) return 'contains a lone surrogate';
      return null;
    case 'boolean':
      return null;
    case 'object': {
      if (value === null) return null;
      for (const [k, v] of Object.entries(value)) {
        const p = keyValueProblem(k, depth + 1) ?? keyValueProblem(v, depth + 1);
        if (p !== null) return p;
      }
      return null;
    }
    default:
      return `of type ${typeof value}`;
  }
}

/** Version of the key layout; bump it if the hashed shape ever changes, so old keys never collide. */
const KEY_LAYOUT = 1;

/**
 * Builds the semantic duplicate key of a proposal (docs/design.md §2 "The semantic key").
 *
 * Scope (tenant, area, agent) and the tool id are always hashed in; neither the agent nor the
 * curator can remove them, so identical arguments in two tenants never collide. The agent version
 * is deliberately not part of it. A declared path that matches nothing is an error (`missing`),
 * never an empty value, and the whole body is never hashed as a fallback.
 *
 * `values` are what the store keeps for investigators; a key path the tool also lists in `redact`
 * is kept only as a fingerprint, keyed with `secretKey` (the authority key) so a dump of the store
 * plus a dictionary cannot recover it from `key_values`. Without a key
 * (`authorityKey: null`) the fingerprint is a plain SHA-256. (The key hash still covers the raw
 * values; keying it needs a migration window of its own.)
 */
export function buildSemanticKey(
  tool: Tool,
  scope: Scope,
  args: ArgumentDocument,
  secretKey: string | null = null,
): SemanticKey {
  const dedupe = tool.dedupe;
  if (dedupe === null) throw new Error(`tool ${tool.id} has no dedupe block`);
  const values: unknown[] = [];
  const missing: string[] = [];
  const invalid: string[] = [];
  for (const path of dedupe.key) {
    const found = path.evaluate(args);
    if (found.length === 0 || found.every((v) => v === undefined)) {
      missing.push(path.expression);
      continue;
    }
    const value = found.length === 1 ? found[0] : found;
    const problem = keyValueProblem(value);
    if (problem !== null) invalid.push(`${path.expression} is ${problem}`);
    values.push(value);
  }
  if (missing.length > 0) return { ok: false, reason: 'key_path_missing', paths: missing };
  if (invalid.length > 0) return { ok: false, reason: 'key_value_invalid', paths: invalid };
  const redacted = new Set(tool.redact.map((p) => p.expression));
  const fingerprint = (v: unknown): string =>
    secretKey === null ? sha256Ref(canonicalJson(v)) : hmacRef(secretKey, canonicalJson(v));
  const stored = dedupe.key.map((path, i) =>
    redacted.has(path.expression) ? fingerprint(values[i]) : values[i],
  );
  const hash = sha256Ref(
    canonicalJson({
      v: KEY_LAYOUT,
      tenant: scope.tenant,
      area: scope.area,
      agent: scope.agent,
      tool: tool.id,
      // Raw values (not keyed): keying them here would change every hash of a tool that keys on a
      // redacted path, and a confirmed key would stop being recognised on upgrade. Conflated by
      // default (`conflateScalars`): a key of strings hashes as it always did.
      key: dedupe.scalars === 'conflate' ? values.map(conflateScalars) : values,
    }),
  );
  return { ok: true, hash, values: stored };
}

/** A JSON number's text as a key: the shortest round-trip spelling (`100.0`, `1e2` → `100`). */
const JSON_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * A key value as a destination that casts its parameters reads it: every scalar becomes its text,
 * so `100`, `"100"`, `100.0`, `"1e2"` and a form field `100` are one value, and `true` is `"true"`
 * (Rails keeps form fields as strings and JSON numbers as numbers; Django REST framework and
 * Express with both body parsers cast them, so one call sent twice, once as JSON and once as a
 * form, is the same effect to them). A numeric string is read as its number only when that
 * number is exact: an integer past 2^53 or a string JSON would not parse as a number stays text,
 * so two distinct large ids never collide. `null`, objects and arrays keep their shape, with
 * their scalars conflated. Policy: `dedupe.scalars` (docs/policy-reference.md).
 */
export function conflateScalars(value: unknown): unknown {
  switch (typeof value) {
    case 'number':
      return numberText(value);
    case 'boolean':
      return String(value);
    case 'string':
      return JSON_NUMBER.test(value) ? numericStringText(value) : value;
    case 'object': {
      if (value === null) return null;
      if (Array.isArray(value)) return value.map(conflateScalars);
      const out: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
      for (const [k, v] of Object.entries(value)) out[k] = conflateScalars(v);
      return out;
    }
    default:
      return value;
  }
}

function numberText(n: number): string {
  // -0 is 0 to every parser that casts; String(-0) is already "0".
  return String(n);
}

function numericStringText(text: string): string {
  const n = Number(text);
  if (!Number.isFinite(n)) return text;
  if (Number.isInteger(n) && !Number.isSafeInteger(n)) return text;
  // A decimal JavaScript cannot hold exactly (more digits than a double keeps) stays text: two
  // such strings that differ only past the 17th digit are two values to a decimal field.
  if (!Number.isInteger(n) && significantDigits(text) > 15) return text;
  return numberText(n);
}

function significantDigits(text: string): number {
  const mantissa = text
    .replace(/^-/, '')
    .replace(/[eE].*$/, '')
    .replace('.', '');
  return mantissa.replace(/^0+/, '').length;
}
