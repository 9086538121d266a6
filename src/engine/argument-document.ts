import { ArgumentRefusal } from './argument-refusal.js';
import { bodyLabel } from './body-label.js';
import { BODY_LIMITS, type BodyLimits, scanJson } from './json-scan.js';
import { multipartFields } from './multipart-fields.js';
import type { GateRequest } from './types.js';

/**
 * The document every tool JSONPath is evaluated over (docs/design.md §4.1):
 * `{ path: {captured params}, query: {…}, body: <parsed JSON>, graphql: {field, args} }`.
 */
export interface ArgumentDocument {
  readonly path: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string | string[]>>;
  /** Parsed JSON (or form) body; `undefined` when there is none or it does not parse. */
  readonly body: unknown;
  /** The GraphQL mutation a `match.graphql` tool's request performs (`graphql-request.ts`). */
  readonly graphql?: GraphqlArguments;
}

/** `$.graphql`: the root mutation field, and its arguments with variables substituted. */
export interface GraphqlArguments {
  readonly field: string;
  readonly args: Readonly<Record<string, unknown>>;
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

/** The request's first Content-Type value. */
export function contentTypeOf(request: Pick<GateRequest, 'headers'>): string | undefined {
  const ct = request.headers['content-type'];
  return Array.isArray(ct) ? ct[0] : ct;
}

/**
 * Parses a governed body by its label (`body-label.ts`): `application/json` as JSON,
 * `application/x-www-form-urlencoded` as an object like a query, `multipart/form-data` as an
 * object of its fields (`multipart-fields.ts`), as the frameworks that read them do. JSON bytes
 * under any other label (or none, or a form's) are refused: some destinations read them as JSON,
 * others not at all, so the gate cannot tell which arguments the call carries. Other bytes under
 * other labels are `undefined`: a key path into them is then absent, which the tool's
 * `on_missing` rule decides.
 *
 * A linear scan runs first (`json-scan.ts`), so a body past `limits` costs no JSON.parse, and
 * everything after it (canonical JSON, JSONPath, clones) only ever sees bounded shapes.
 *
 * @throws {ArgumentRefusal} for a body past `limits`, a JSON body with a duplicate member name, or
 *   a body whose label and bytes disagree.
 */
export function parseBody(
  body: Uint8Array,
  contentType: string | undefined,
  limits: BodyLimits = BODY_LIMITS,
  jsonTypes?: ReadonlySet<string>,
): unknown {
  if (body.byteLength === 0) return undefined;
  let text: string;
  try {
    text = decoder.decode(body);
  } catch {
    return undefined;
  }
  const label = bodyLabel(contentType, jsonTypes);
  if (label === 'multipart') {
    const parsed = multipartFields(body, contentType!, limits.maxNodes);
    if (!parsed.ok) throw ArgumentRefusal.unreadable(`multipart/form-data: ${parsed.problem}`);
    return parsed.fields;
  }
  const scan = scanJson(text, limits);
  const looksJson = scan.kind !== 'not_json' && /^\s*[[{]/.test(text);
  if (label === 'form') {
    // JSON bytes labelled as a form: Express, Django and Rails read form fields (one odd name, no
    // `title`), Go handlers that decode whatever comes read the JSON. Two readings of one call:
    // refused, never keyed on one while a destination acts on the other.
    if (looksJson) throw ArgumentRefusal.labelDisagrees(contentType);
    if (fieldCountExceeds(text, limits.maxNodes)) throw ArgumentRefusal.tooManyNodes(limits);
    return parseQuery(text);
  }
  if (scan.kind === 'not_json') return undefined;
  // JSON bytes under a label some frameworks do not read as JSON (`body-label.ts`).
  if (label !== 'json' && looksJson) throw ArgumentRefusal.labelDisagrees(contentType);
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
  jsonTypes?: ReadonlySet<string>,
): ArgumentDocument {
  const contentType = contentTypeOf(request);
  // PHP fills $_POST from a multipart body for POST only: Laravel acts on a PUT without its fields,
  // while Rails, Express and Go read them.
  if (request.method !== 'POST' && request.body.byteLength > 0 && bodyLabel(contentType) === 'multipart') {
    throw ArgumentRefusal.unreadable(
      `multipart/form-data on a ${request.method}: some servers read multipart fields of POST requests only`,
    );
  }
  return {
    path: params,
    query: parseQuery(request.query),
    body: parseBody(request.body, contentType, limits, jsonTypes),
  };
}
