import { suggestField } from '../config/index.js';
import { parseDuration } from './duration.js';
import { compileJsonPath, parseJsonPath } from './json-path.js';
import type { PolicyReader, Slot } from './policy-reader.js';
import type { CompiledPath } from './types.js';

/**
 * Roots of the argument document `{ path, query, body, graphql }` that key and redaction paths run
 * over; `graphql` (`{ field, args }`) only for a `match.graphql` tool (`compile-tool.ts` checks).
 */
const ARGUMENT_ROOTS: readonly string[] = Object.freeze(['path', 'query', 'body', 'graphql']);
const GRAPHQL_MEMBERS: readonly string[] = Object.freeze(['field', 'args']);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A JSONPath over any document (a response body, a remote item, the request's JSON body). */
export function readJsonPath(r: PolicyReader, slot: Slot): CompiledPath | null {
  const text = r.string(slot);
  if (text === null) return null;
  try {
    return compileJsonPath(text);
  } catch (err) {
    r.issue(slot.at, slot.field, (err as Error).message);
    return null;
  }
}

/**
 * A JSONPath over the argument document. It must start at `$.path`, `$.query` or `$.body` (or be
 * `$`), and a `$.path.X` step must name a capture of the tool's path template: otherwise the
 * key would be missing on every request and the tool would block (or go ungoverned) forever.
 * `captures` is `null` when the template itself was invalid (already reported).
 */
export function readArgumentPath(
  r: PolicyReader,
  slot: Slot,
  captures: readonly string[] | null,
): CompiledPath | null {
  const compiled = readJsonPath(r, slot);
  if (compiled === null) return null;
  const [first, second] = parseJsonPath(compiled.expression).segments;
  if (first === undefined) return compiled;
  if (first.type !== 'member' || !ARGUMENT_ROOTS.includes(first.name)) {
    r.issue(
      slot.at,
      slot.field,
      `${compiled.expression}: argument paths start with $.path, $.query, $.body or $.graphql`,
    );
    return null;
  }
  if (
    first.name === 'graphql' &&
    second !== undefined &&
    (second.type !== 'member' || !GRAPHQL_MEMBERS.includes(second.name))
  ) {
    r.issue(
      slot.at,
      slot.field,
      `${compiled.expression}: $.graphql holds field (the mutation's name) and args (its arguments)`,
    );
    return null;
  }
  if (
    first.name === 'path' &&
    second?.type === 'member' &&
    captures !== null &&
    !captures.includes(second.name)
  ) {
    const have = captures.length === 0 ? 'none' : captures.map((c) => `{${c}}`).join(', ');
    r.issue(
      slot.at,
      slot.field,
      `${compiled.expression}: path has no {${second.name}} capture (captures: ${have})`,
    );
    return null;
  }
  return compiled;
}

/** Whether an argument path reads the GraphQL call (`$.graphql…`). */
export function readsGraphql(path: CompiledPath): boolean {
  const [first] = parseJsonPath(path.expression).segments;
  return first?.type === 'member' && first.name === 'graphql';
}

/** A list of argument paths; `null` entries are dropped after their issue is recorded. */
export function readArgumentPaths(
  r: PolicyReader,
  slot: Slot,
  captures: readonly string[] | null,
): CompiledPath[] {
  const items = r.items(slot) ?? [];
  return items
    .map((item) => readArgumentPath(r, item, captures))
    .filter((p): p is CompiledPath => p !== null);
}

/** A duration in ms; `permanent` (→ `null`) only where `allowPermanent`. `undefined` on error. */
export function readDuration(
  r: PolicyReader,
  slot: Slot,
  allowPermanent: boolean,
  min = 0,
): number | null | undefined {
  const text = r.string(slot);
  if (text === null) return undefined;
  let ms: number | null;
  try {
    ms = parseDuration(text);
  } catch (err) {
    r.issue(slot.at, slot.field, (err as Error).message);
    return undefined;
  }
  if (ms === null && !allowPermanent) {
    r.issue(slot.at, slot.field, 'permanent is only allowed for dedupe.window');
    return undefined;
  }
  if (ms !== null && ms < min) {
    r.issue(slot.at, slot.field, `must be at least ${min}ms`);
    return undefined;
  }
  return ms;
}

export function readHeaderName(r: PolicyReader, slot: Slot): string | null {
  const text = r.string(slot);
  if (text === null) return null;
  if (HEADER_NAME.test(text)) return text;
  r.issue(slot.at, slot.field, `${JSON.stringify(text)} is not a valid HTTP header name`);
  return null;
}

/** An HTTP method token, upper-cased (methods are case-insensitive in policy files). */
/**
 * The methods a tool may name: RFC 9110's, PATCH (RFC 5789), the WebDAV and CalDAV ones, QUERY
 * (draft-ietf-httpbis-safe-method-w-body) and the common extensions PURGE, LINK, UNLINK. A closed
 * set because a typo (`PSOT`) would otherwise load fine and leave the effect it meant ungoverned:
 * no request ever carries that method.
 */
export const HTTP_METHODS: readonly string[] = Object.freeze([
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'DELETE',
  'CONNECT',
  'OPTIONS',
  'TRACE',
  'PATCH',
  'QUERY',
  'PROPFIND',
  'PROPPATCH',
  'MKCOL',
  'COPY',
  'MOVE',
  'LOCK',
  'UNLOCK',
  'REPORT',
  'SEARCH',
  'MKCALENDAR',
  'PURGE',
  'LINK',
  'UNLINK',
]);

export function readMethod(r: PolicyReader, slot: Slot): string | null {
  const text = r.string(slot);
  if (text === null) return null;
  const upper = text.toUpperCase();
  if (HTTP_METHODS.includes(upper)) return upper;
  const near = /^[A-Za-z]+$/.test(text) ? suggestField(upper, HTTP_METHODS) : null;
  r.issue(
    slot.at,
    slot.field,
    `${JSON.stringify(text)} is not an HTTP method${near === null ? '' : ` (did you mean ${near}?)`}: a tool that names it would never match, leaving its effect ungoverned (known: ${HTTP_METHODS.join(', ')})`,
  );
  return null;
}
