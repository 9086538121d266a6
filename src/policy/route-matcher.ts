import { foldName } from './fold-name.js';
import { type HostPattern, hostMatches } from './host-pattern.js';
import { compileJsonPath } from './json-path.js';
import type { LenientPath } from './lenient-match.js';
import type { PathTemplate } from './path-template.js';
import type { CompiledPath, RouteInput, RouteMatch, ToolMatcher } from './types.js';

export type BodyScalar = string | number | boolean | null;

/** One `match.body` condition: the value at `path` in the parsed JSON body must equal `value`. */
export interface BodyCondition {
  readonly path: CompiledPath;
  /** Canonical spelling of the path, so `$.a` and `$['a']` compare equal across tools. */
  readonly canonical: string;
  readonly value: BodyScalar;
}

/**
 * The compiled `match` block of one tool. Host, method and path are checked from the request
 * head; body conditions only once the JSON body is parsed, so the proxy buffers a body only when
 * a candidate needs it.
 */
export class RouteMatcher implements ToolMatcher {
  readonly hosts: readonly HostPattern[];
  /** Upper case. */
  readonly method: string;
  readonly path: PathTemplate;
  readonly bodyConditions: readonly BodyCondition[];
  readonly hasBodyConditions: boolean;
  /** Order-independent identity of the body conditions: equal strings mean the same conditions. */
  readonly bodyKey: string;
  /** Media types besides `application/json` the destination reads as JSON (`match.json_types`). */
  readonly jsonTypes: readonly string[];
  /**
   * The root mutation field this tool is (`match.graphql.mutation`), or `null`. Such a tool is
   * matched on GET as well as its method: a GraphQL server reads a document from a query string
   * too, and some run mutations sent so.
   */
  readonly graphqlMutation: string | null;
  readonly #explain: string;
  /** The conditions with every member name folded (`foldName`), for `matchesBodyFolded`. */
  readonly #folded: readonly { readonly path: CompiledPath; readonly value: BodyScalar }[];

  constructor(
    hosts: readonly HostPattern[],
    method: string,
    path: PathTemplate,
    body: readonly BodyCondition[],
    jsonTypes: readonly string[] = [],
    graphqlMutation: string | null = null,
  ) {
    this.jsonTypes = Object.freeze([...jsonTypes]);
    this.graphqlMutation = graphqlMutation;
    this.hosts = Object.freeze([...hosts]);
    this.method = method;
    this.path = path;
    this.bodyConditions = Object.freeze([...body]);
    // A GraphQL tool is chosen by its document, as a `match.body` tool by its body: both are the
    // more specific claim on a shared endpoint, and come first in selection order.
    this.hasBodyConditions = body.length > 0 || graphqlMutation !== null;
    // Member names only (no script filters: evaluation is disabled), so folding the whole
    // expression folds exactly its names.
    this.#folded = Object.freeze(
      body.map((c) => ({ path: compileJsonPath(foldName(c.path.expression)), value: c.value })),
    );
    this.bodyKey = JSON.stringify([
      body.map((c): [string, BodyScalar] => [c.canonical, c.value]).sort(compareEntries),
      graphqlMutation,
    ]);
    const conditions = body.map(
      (c) => `${c.path.expression}=${typeof c.value === 'string' ? c.value : JSON.stringify(c.value)}`,
    );
    this.#explain =
      `${method} ${this.hosts.map((h) => h.text).join(',')} ${path.text}` +
      (conditions.length > 0 ? ` body ${conditions.join(', ')}` : '') +
      (graphqlMutation === null ? '' : ` graphql mutation ${graphqlMutation}`);
    Object.freeze(this);
  }

  matchRoute(input: RouteInput): RouteMatch | null {
    if (!this.matchesHost(input.host, input.port)) return null;
    const params = this.matchMethodAndPath(input);
    return params === null ? null : { params };
  }

  matchesHost(host: string, port: number): boolean {
    for (const pattern of this.hosts) if (hostMatches(pattern, host, port)) return true;
    return false;
  }

  /** Method and path only: the classifier has already matched the host through its index. */
  matchMethodAndPath(input: RouteInput): Readonly<Record<string, string>> | null {
    return this.#matchesMethod(input.method) ? this.path.match(input.path) : null;
  }

  #matchesMethod(method: string): boolean {
    return method === this.method || (this.graphqlMutation !== null && method === 'GET');
  }

  /**
   * The lenient readings under which `method` and the lenient path hit this route when the strict
   * path does not (`case folded` added when only a case-insensitive comparison hits), or hit it
   * with other captures than the strict path does (`/items/1;v` is `{id: "1;v"}` strictly, `1` to
   * a server that drops `;params`: a key on `id` would not see the repeat). `null` when no
   * reading does. With `keyed`, only those captures count: a capture no key path reads names the
   * same effect either way (`/files/report.pdf` is `report` to Rails, `report.pdf` to others, and
   * a tool keyed on the body alone does the same thing to both). The classifier has already
   * matched the host.
   */
  matchLenient(
    method: string,
    strictPath: string,
    lenient: LenientPath,
    keyed: ReadonlySet<string> | null = null,
  ): readonly string[] | null {
    if (!this.#matchesMethod(method)) return null;
    const strict = this.path.match(strictPath);
    if (strict !== null) {
      if (lenient.readings.length === 0) return null;
      const loose = this.path.match(lenient.path);
      return loose !== null && !sameParams(strict, loose, keyed)
        ? [...lenient.readings, 'captures read differently']
        : null;
    }
    if (lenient.readings.length > 0 && this.path.match(lenient.path) !== null) return lenient.readings;
    if (this.path.matchFolded(lenient.path) !== null) return [...lenient.readings, 'case folded'];
    return null;
  }

  /**
   * Whether the conditions hold when member names are compared without letter case: `foldedBody`
   * is the parsed body with every member name folded (`foldName`). A body that matches only so is one a
   * case-insensitive binder (Go's encoding/json) reads as this tool's call.
   */
  matchesBodyFolded(foldedBody: unknown): boolean {
    if (this.bodyConditions.length === 0 || foldedBody === undefined) return false;
    for (const c of this.#folded) {
      if (!c.path.evaluate(foldedBody).some((v) => v === c.value)) return false;
    }
    return true;
  }

  matchesBody(body: unknown): boolean {
    if (this.bodyConditions.length === 0) return true;
    if (body === undefined) return false; // not JSON: conditions cannot hold
    for (const c of this.bodyConditions) {
      if (!c.path.evaluate(body).some((v) => v === c.value)) return false;
    }
    return true;
  }

  explain(): string {
    return this.#explain;
  }
}

/** Equal captures, comparing only those in `keyed` when given (the ones the tool's key reads). */
function sameParams(
  a: Readonly<Record<string, string>>,
  b: Readonly<Record<string, string>>,
  keyed: ReadonlySet<string> | null,
): boolean {
  for (const k in a) if ((keyed === null || keyed.has(k)) && a[k] !== b[k]) return false;
  return true;
}

function compareEntries(a: [string, BodyScalar], b: [string, BodyScalar]): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}
