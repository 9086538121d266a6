import { type HostPattern, hostMatches } from './host-pattern.js';
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
  readonly #explain: string;

  constructor(
    hosts: readonly HostPattern[],
    method: string,
    path: PathTemplate,
    body: readonly BodyCondition[],
  ) {
    this.hosts = Object.freeze([...hosts]);
    this.method = method;
    this.path = path;
    this.bodyConditions = Object.freeze([...body]);
    this.hasBodyConditions = body.length > 0;
    this.bodyKey = JSON.stringify(
      body.map((c): [string, BodyScalar] => [c.canonical, c.value]).sort(compareEntries),
    );
    const conditions = body.map(
      (c) => `${c.path.expression}=${typeof c.value === 'string' ? c.value : JSON.stringify(c.value)}`,
    );
    this.#explain =
      `${method} ${this.hosts.map((h) => h.text).join(',')} ${path.text}` +
      (conditions.length > 0 ? ` body ${conditions.join(', ')}` : '');
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
    return input.method === this.method ? this.path.match(input.path) : null;
  }

  matchesBody(body: unknown): boolean {
    if (!this.hasBodyConditions) return true;
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

function compareEntries(a: [string, BodyScalar], b: [string, BodyScalar]): number {
  return a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0;
}
