import { JSONPath } from 'jsonpath-plus';
import type { CompiledPath } from './types.js';

/**
 * One step of a JSONPath in the subset effectgate accepts. The subset is deliberately small: it is
 * everything a key, redaction or body condition needs, and nothing that reaches jsonpath-plus's
 * script evaluator (which has had repeated RCE fixes) or its quirky string normalizer.
 */
export type JsonPathSegment =
  | { readonly type: 'member'; readonly name: string }
  | { readonly type: 'descendant'; readonly name: string | null }
  | { readonly type: 'wildcard' }
  | { readonly type: 'index'; readonly indices: readonly number[] }
  | { readonly type: 'slice'; readonly text: string };

/** A parsed expression: the segments after `$` and a canonical spelling of them. */
export interface ParsedJsonPath {
  readonly segments: readonly JsonPathSegment[];
  /** `$.a['b.c'][0]` style; equal for `$.a` and `$['a']`, so it can be compared. */
  readonly canonical: string;
}

const NAME = /^[\p{L}\p{N}_-]+/u;
const SIMPLE_NAME = /^[\p{L}\p{N}_-]+$/u;
const SLICE = /^-?\d*:-?\d*(?::\d*)?$/;
const INDEX_LIST = /^\d+(?:,\d+)*$/;
// Characters jsonpath-plus gives a meaning to even inside quotes (`*`, `:`, `,`, `~`, `^`, `@`, `;`,
// `%@%`, parentheses), so a quoted name containing one would silently mean something else.
const QUOTED_FORBIDDEN = /['"[\]\\;~^%@`*:(),?\p{Cc}]/u;

class JsonPathSyntaxError extends Error {
  constructor(expression: string, at: number, problem: string) {
    super(`invalid JSONPath ${JSON.stringify(expression)} at character ${at + 1}: ${problem}`);
    this.name = 'JsonPathSyntaxError';
  }
}

/** Parses `expression` into the accepted subset, or throws a plain Error saying what is wrong. */
export function parseJsonPath(expression: string): ParsedJsonPath {
  if (typeof expression !== 'string' || expression.length === 0) {
    throw new Error('invalid JSONPath: expected a non-empty string starting with $');
  }
  if (/\?\(|\[\s*\(/.test(expression)) {
    throw new Error(
      `JSONPath ${JSON.stringify(expression)} uses a script expression (?(...) or (...)); ` +
        'script evaluation is disabled for safety, use plain member, index and wildcard steps',
    );
  }
  if (expression[0] !== '$') throw new JsonPathSyntaxError(expression, 0, 'must start with $');
  const segments: JsonPathSegment[] = [];
  let i = 1;
  while (i < expression.length) {
    const rest = expression.slice(i);
    if (rest.startsWith('..')) {
      const after = rest.slice(2);
      if (after.startsWith('*')) {
        segments.push({ type: 'descendant', name: null });
        i += 3;
        continue;
      }
      const name = NAME.exec(after);
      if (name === null) throw new JsonPathSyntaxError(expression, i + 2, 'expected a name or * after ..');
      segments.push({ type: 'descendant', name: name[0] });
      i += 2 + name[0].length;
    } else if (rest[0] === '.') {
      const after = rest.slice(1);
      if (after.startsWith('*')) {
        segments.push({ type: 'wildcard' });
        i += 2;
        continue;
      }
      const name = NAME.exec(after);
      if (name === null)
        throw new JsonPathSyntaxError(expression, i + 1, 'expected a member name or * after .');
      segments.push({ type: 'member', name: name[0] });
      i += 1 + name[0].length;
    } else if (rest[0] === '[') {
      const close = rest.indexOf(']');
      if (close === -1) throw new JsonPathSyntaxError(expression, i, 'unterminated [');
      segments.push(parseBracket(expression, i, rest.slice(1, close)));
      i += close + 1;
    } else {
      throw new JsonPathSyntaxError(expression, i, `unexpected ${JSON.stringify(rest[0])}`);
    }
  }
  return { segments, canonical: `$${segments.map(canonicalSegment).join('')}` };
}

function parseBracket(expression: string, at: number, inner: string): JsonPathSegment {
  if (inner === '*') return { type: 'wildcard' };
  if (INDEX_LIST.test(inner)) return { type: 'index', indices: inner.split(',').map(Number) };
  if (/^-\d+$/.test(inner)) {
    throw new JsonPathSyntaxError(
      expression,
      at,
      `negative index [${inner}] is not supported; use [${inner}:]`,
    );
  }
  if (SLICE.test(inner)) return { type: 'slice', text: inner };
  const quote = inner[0];
  if ((quote === "'" || quote === '"') && inner.length >= 2 && inner.at(-1) === quote) {
    const name = inner.slice(1, -1);
    if (name.length === 0) throw new JsonPathSyntaxError(expression, at, 'empty quoted name');
    if (QUOTED_FORBIDDEN.test(name)) {
      throw new JsonPathSyntaxError(
        expression,
        at,
        `quoted name ${JSON.stringify(name)} contains a reserved character`,
      );
    }
    return { type: 'member', name };
  }
  throw new JsonPathSyntaxError(
    expression,
    at,
    `unsupported bracket [${inner}]; expected [*], [0], [0,2], [1:3] or ['name']`,
  );
}

function canonicalSegment(s: JsonPathSegment): string {
  switch (s.type) {
    case 'member':
      return SIMPLE_NAME.test(s.name) ? `.${s.name}` : `['${s.name}']`;
    case 'descendant':
      return `..${s.name ?? '*'}`;
    case 'wildcard':
      return '[*]';
    case 'index':
      return `[${s.indices.join(',')}]`;
    case 'slice':
      return `[${s.text}]`;
  }
}

/**
 * Compiles a JSONPath once, at load time. Evaluation goes through jsonpath-plus with `eval: false`
 * and the canonical spelling (so only syntax checked here ever reaches it); an absent path gives
 * `[]`, never `undefined`.
 *
 * @example compileJsonPath('$.body.title').evaluate({ body: { title: 'x' } }) // ['x']
 */
export function compileJsonPath(expression: string): CompiledPath {
  const parsed = parseJsonPath(expression);
  const path = parsed.canonical;
  const isRoot = parsed.segments.length === 0;
  // A trial run proves jsonpath-plus accepts the canonical form with scripts disabled.
  run(path, {});
  const compiled: CompiledPath = {
    expression,
    evaluate(document: unknown): unknown[] {
      if (document === undefined) return [];
      if (isRoot) return [document];
      // jsonpath-plus treats any falsy document as "no document"; scalars have no members anyway.
      if (document === null || typeof document !== 'object') return [];
      return run(path, document);
    },
    remove(document: unknown): void {
      if (isRoot || document === null || typeof document !== 'object') return;
      const hits = trace(path, document);
      // Last match first, so splicing an array item does not shift the ones still to delete.
      for (let i = hits.length - 1; i >= 0; i--) {
        const { parent, parentProperty } = hits[i]!;
        if (Array.isArray(parent) && typeof parentProperty === 'number') parent.splice(parentProperty, 1);
        else if (parent !== null && typeof parent === 'object' && typeof parentProperty === 'string') {
          delete (parent as Record<string, unknown>)[parentProperty];
        }
      }
    },
  };
  return Object.freeze(compiled);
}

interface TraceResult {
  readonly value: unknown;
  readonly parent: unknown;
  readonly parentProperty: unknown;
}

function trace(path: string, json: object): TraceResult[] {
  const out: unknown = JSONPath({ path, json, eval: false, wrap: true, resultType: 'all' });
  if (!Array.isArray(out)) return [];
  // JSON semantics: a string has no members and an array's length is not data, though
  // jsonpath-plus (which tests Object.hasOwn) would return 'abc'.length or 'abc'[0].
  return (out as TraceResult[]).filter(
    (r) => typeof r.parent !== 'string' && !(Array.isArray(r.parent) && r.parentProperty === 'length'),
  );
}

function run(path: string, json: object): unknown[] {
  return trace(path, json).map((r) => r.value);
}
