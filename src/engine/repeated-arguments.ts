import { type CompiledPath, foldName, type Tool } from '../policy/index.js';
import { type ArgumentDocument, contentTypeOf, parseQuery } from './argument-document.js';
import { ArgumentRefusal } from './argument-refusal.js';
import { bodyLabel, readsAsFields } from './body-label.js';
import { appendStep } from './json-scan.js';
import { bracketedReading, firstDivergentPath } from './nested-parameters.js';
import type { GateRequest } from './types.js';

/**
 * Refuses a repeated query parameter or form field that a key path of `tool` reads (docs/design.md
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
  const label = bodyLabel(contentTypeOf(request));
  const fields = readsAsFields(label);
  const body = fields ? probe(args.body, '$.body', markers) : {};
  // Repeats are rare: most requests pass without evaluating anything.
  if (markers.size > 0) {
    const hit = firstMarked(paths, { path: {}, query, body }, markers);
    if (hit !== null) throw ArgumentRefusal.repeatedParameter(hit.marked, hit.keyPath, tool.id);
  }
  // `fields[summary]=x`: nested by Rails, PHP and qs, one literal name to Django, Flask and Go.
  const nestedBody = fields ? bracketedReading(args.body) : null;
  const nestedQuery = bracketedReading(args.query);
  if (nestedBody !== null || nestedQuery !== null) {
    const nested = { ...args, body: nestedBody ?? args.body, query: nestedQuery ?? args.query };
    const divergent = firstDivergentPath(paths, args, nested);
    if (divergent !== null) throw ArgumentRefusal.nestedParameter(divergent, tool.id);
  }
  // A name given in the query and in the body: which one a server binds depends on the framework.
  const both = namesInBoth(args.query, args.body);
  if (both.length > 0) {
    const names = new Map<unknown, string>();
    const inQuery: Record<string, unknown> = {};
    const inBody: Record<string, unknown> = {};
    for (const name of both) {
      bind(inQuery, name, {}, name, names);
      bind(inBody, name, {}, name, names);
    }
    const hit = firstMarked(paths, { path: {}, query: inQuery, body: inBody }, names);
    if (hit !== null) throw ArgumentRefusal.twoSources(hit.marked, hit.keyPath, tool.id);
  }
}

/** The first key path that reaches a marker of `document`, and what that marker stands for. */
function firstMarked(
  paths: readonly CompiledPath[],
  document: unknown,
  markers: ReadonlyMap<unknown, string>,
): { readonly marked: string; readonly keyPath: string } | null {
  for (const path of paths) {
    for (const found of path.evaluate(document)) {
      const marked = markers.get(found);
      if (marked !== undefined) return { marked, keyPath: path.expression };
    }
  }
  return null;
}

/**
 * Sets `record[name] = value` as data (a name like `__proto__` is a member, not the prototype) and
 * remembers what `value` stands for.
 */
function bind(
  record: Record<string, unknown>,
  name: string,
  value: object,
  standsFor: string,
  markers: Map<unknown, string>,
): void {
  markers.set(value, standsFor);
  Object.defineProperty(record, name, { value, enumerable: true, writable: true, configurable: true });
}

/** `count` markers bound under `name` as a repeat: the array and each item stand for `path`. */
function bindRepeat(
  record: Record<string, unknown>,
  name: string,
  count: number,
  path: string,
  markers: Map<unknown, string>,
): void {
  const items = Array.from({ length: count }, () => ({}));
  for (const m of items) markers.set(m, path);
  bind(record, name, items, path, markers);
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
    bindRepeat(probeQuery, name, 2, appendStep('$.query', name), markers);
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
  const bodyNames = new Set(Object.keys(body).map(foldName));
  const out: string[] = [];
  for (const name of queryNames) if (bodyNames.has(foldName(name))) out.push(name);
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
    bindRepeat(out, name, value.length, appendStep(root, name), markers);
  }
  return out;
}
