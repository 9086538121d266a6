import { ArgumentRefusal } from './argument-refusal.js';
import { BODY_LIMITS, type BodyLimits, scanJson } from './json-scan.js';
import type { GateRequest } from './types.js';

/**
 * The document every tool JSONPath is evaluated over (DESIGN.md §4.1):
 * `{ path: {captured params}, query: {…}, body: <parsed JSON> }`.
 */
export interface ArgumentDocument {
  readonly path: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string | string[]>>;
  /** Parsed JSON (or form) body; `undefined` when there is none or it does not parse. */
  readonly body: unknown;
}

/**
 * Parses a raw query string; a repeated name becomes an array, in order. The result has no
 * prototype: names like `constructor` or `__proto__` are data, not inherited members.
 */
export function parseQuery(raw: string): Record<string, string | string[]> {
  const out = Object.create(null) as Record<string, string | string[]>;
  if (raw === '') return out;
  for (const [k, v] of new URLSearchParams(raw)) {
    const prev = Object.hasOwn(out, k) ? out[k] : undefined;
    if (prev === undefined) out[k] = v;
    else if (Array.isArray(prev)) prev.push(v);
    else out[k] = [prev, v];
  }
  return out;
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/** True when `contentType` says the body is a form, which the gate then reads like a query. */
export function isFormBody(contentType: string | undefined): boolean {
  return contentType?.toLowerCase().startsWith('application/x-www-form-urlencoded') === true;
}

/** The request's first Content-Type value. */
export function contentTypeOf(request: Pick<GateRequest, 'headers'>): string | undefined {
  const ct = request.headers['content-type'];
  return Array.isArray(ct) ? ct[0] : ct;
}

/**
 * Parses a governed body. JSON is tried whatever the Content-Type says (agents mislabel bodies);
 * `application/x-www-form-urlencoded` becomes an object like a query. Anything else is
 * `undefined`: a key path into it is then absent, which the tool's `on_missing` rule decides.
 *
 * A linear scan runs first (`json-scan.ts`), so a body past `limits` costs no JSON.parse, and
 * everything after it (canonical JSON, JSONPath, clones) only ever sees bounded shapes.
 *
 * @throws {ArgumentRefusal} for a body past `limits`, or a JSON body with a duplicate member name.
 */
export function parseBody(
  body: Uint8Array,
  contentType: string | undefined,
  limits: BodyLimits = BODY_LIMITS,
): unknown {
  if (body.byteLength === 0) return undefined;
  let text: string;
  try {
    text = decoder.decode(body);
  } catch {
    return undefined;
  }
  if (isFormBody(contentType)) {
    if (fieldCountExceeds(text, limits.maxNodes)) throw ArgumentRefusal.tooManyNodes(limits);
    return parseQuery(text);
  }
  const scan = scanJson(text, limits);
  if (scan.kind === 'not_json') return undefined;
  if (scan.kind === 'too_deep') throw ArgumentRefusal.tooDeep(scan.path, limits);
  if (scan.kind === 'too_many_nodes') throw ArgumentRefusal.tooManyNodes(limits);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text) as unknown;
  } catch {
    // The scan is lenient about string and number spelling; JSON.parse has the last word.
    return undefined;
  }
  if (scan.kind === 'duplicate_member') throw ArgumentRefusal.duplicateMember(scan.path);
  return parsed;
}

/** More than `max` `&`-separated fields, counted without splitting. */
function fieldCountExceeds(text: string, max: number): boolean {
  let fields = 1;
  for (let i = text.indexOf('&'); i !== -1; i = text.indexOf('&', i + 1)) {
    if (++fields > max) return true;
  }
  return false;
}

/** @throws {ArgumentRefusal} see {@link parseBody}. */
export function buildArgumentDocument(
  request: GateRequest,
  params: Readonly<Record<string, string>>,
  limits: BodyLimits = BODY_LIMITS,
): ArgumentDocument {
  return {
    path: params,
    query: parseQuery(request.query),
    body: parseBody(request.body, contentTypeOf(request), limits),
  };
}
