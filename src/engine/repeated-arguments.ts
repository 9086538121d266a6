import type { CompiledPath, Tool } from '../policy/index.js';
import { type ArgumentDocument, contentTypeOf, isFormBody, parseQuery } from './argument-document.js';
import { ArgumentRefusal } from './argument-refusal.js';
import { appendStep } from './json-scan.js';
import type { GateRequest } from './types.js';

/**
 * Refuses a repeated query parameter or form field that a key path of `tool` reads (DESIGN.md
 * §4.1 "Spellings"): `?order=42&order=x1` is `42` to a first-wins server and `x1` to a last-wins
 * one, so the key could name another effect than the one the destination performs. A repeat no key
 * path reads is left alone: it cannot change which effect the gate recognises.
 *
 * The paths the tool declares are evaluated over a probe document holding only the repeated names,
 * each bound to a fresh marker, so any spelling that reaches one (`$.query.order`,
 * `$.query.order[0]`, `$.query.*`, `$..order`) is caught without re-implementing JSONPath.
 *
 * @throws {ArgumentRefusal} naming the first repeated argument a key path reads.
 */
export function refuseRepeatedKeyArguments(tool: Tool, request: GateRequest, args: ArgumentDocument): void {
  const paths = keyPaths(tool);
  if (paths.length === 0) return;
  const markers = new Map<unknown, string>();
  const query = probe(args.query, '$.query', markers);
  // `;` separates parameters too for some servers (Rack 2, Python before 3.9.2, Go before 1.17):
  // `?order=new;order=42` is one `order` to the gate and a repeat to them.
  if (request.query.includes(';')) semicolonReadings(request.query, args.query, query, markers);
  const body = isFormBody(contentTypeOf(request)) ? probe(args.body, '$.body', markers) : {};
  // A name given in the query and in the body: which one a server binds depends on the framework.
  const both = namesInBoth(args.query, args.body);
  // Repeats are rare: most requests end here without evaluating anything.
  if (markers.size === 0 && both.length === 0) return;
  if (markers.size > 0) {
    const document = { path: {}, query, body };
    for (const path of paths) {
      for (const found of path.evaluate(document)) {
        const repeated = markers.get(found);
        if (repeated !== undefined)
          throw ArgumentRefusal.repeatedParameter(repeated, path.expression, tool.id);
      }
    }
  }
  if (both.length > 0) {
    const marks = new Map<unknown, string>();
    const probeQuery: Record<string, unknown> = {};
    const probeBody: Record<string, unknown> = {};
    for (const name of both) {
      const q = {};
      const b = {};
      marks.set(q, name);
      marks.set(b, name);
      Object.defineProperty(probeQuery, name, {
        value: q,
        enumerable: true,
        writable: true,
        configurable: true,
      });
      Object.defineProperty(probeBody, name, {
        value: b,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    const document = { path: {}, query: probeQuery, body: probeBody };
    for (const path of paths) {
      for (const found of path.evaluate(document)) {
        const name = marks.get(found);
        if (name !== undefined) throw ArgumentRefusal.twoSources(name, path.expression, tool.id);
      }
    }
  }
}

/**
 * Adds to `probeQuery` (and `markers`) every parameter whose value differs when `;` is read as a
 * separator: a key path reading one of them reads what some servers do not.
 */
function semicolonReadings(
  raw: string,
  parsed: Readonly<Record<string, unknown>>,
  probeQuery: Record<string, unknown>,
  markers: Map<unknown, string>,
): void {
  const alt = parseQuery(raw.replaceAll(';', '&'));
  for (const name of new Set([...Object.keys(alt), ...Object.keys(parsed)])) {
    if (Object.hasOwn(probeQuery, name)) continue;
    if (JSON.stringify(alt[name]) === JSON.stringify(parsed[name])) continue;
    const path = appendStep('$.query', name);
    const items = [{}, {}];
    for (const m of items) markers.set(m, path);
    markers.set(items, path);
    Object.defineProperty(probeQuery, name, {
      value: items,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
}

/**
 * Top-level names (compared without letter case) that the query and an object body both give:
 * Rails' `params` lets the query win, Go's `FormValue` the form body, others the body.
 */
function namesInBoth(query: unknown, body: unknown): string[] {
  if (query === null || typeof query !== 'object' || body === null || typeof body !== 'object') return [];
  if (Array.isArray(body)) return [];
  const queryNames = Object.keys(query);
  if (queryNames.length === 0) return [];
  const bodyNames = new Map(Object.keys(body).map((n) => [n.toLowerCase(), n] as const));
  const out: string[] = [];
  for (const name of queryNames) if (bodyNames.has(name.toLowerCase())) out.push(name);
  return out;
}

/** The paths that say which effect a call is: the dedupe key and the reconcile lookup's arguments. */
function keyPaths(tool: Tool): readonly CompiledPath[] {
  const key = tool.dedupe?.key ?? [];
  const reconcile = tool.reconcile?.match.map((m) => m.argument) ?? [];
  return reconcile.length === 0 ? key : [...key, ...reconcile];
}

/**
 * `{ name: [marker, marker] }` for every repeated name of `record` (parsed queries and forms hold an
 * array only for a name given more than once); each marker and the array map to the name's path.
 */
function probe(record: unknown, root: string, markers: Map<unknown, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (record === null || typeof record !== 'object') return out;
  for (const [name, value] of Object.entries(record)) {
    if (!Array.isArray(value)) continue;
    const path = appendStep(root, name);
    const items = value.map(() => ({}));
    for (const m of items) markers.set(m, path);
    markers.set(items, path);
    Object.defineProperty(out, name, { value: items, enumerable: true, writable: true, configurable: true });
  }
  return out;
}
