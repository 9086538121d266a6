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

/**
 * Parses a governed body. JSON is tried whatever the Content-Type says (agents mislabel bodies);
 * `application/x-www-form-urlencoded` becomes an object like a query. Anything else is
 * `undefined`: a key path into it is then absent, which the tool's `on_missing` rule decides.
 */
export function parseBody(body: Uint8Array, contentType: string | undefined): unknown {
  if (body.byteLength === 0) return undefined;
  let text: string;
  try {
    text = decoder.decode(body);
  } catch {
    return undefined;
  }
  if (contentType?.toLowerCase().startsWith('application/x-www-form-urlencoded')) return parseQuery(text);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

export function buildArgumentDocument(
  request: GateRequest,
  params: Readonly<Record<string, string>>,
): ArgumentDocument {
  const ct = request.headers['content-type'];
  return {
    path: params,
    query: parseQuery(request.query),
    body: parseBody(request.body, Array.isArray(ct) ? ct[0] : ct),
  };
}
