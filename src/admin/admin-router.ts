/**
 * The one router of the admin server. The API (`admin-api.ts`), the pages
 * (`ui/index.ts`) and the probes (`admin-server.ts`) each list their routes as a table of
 * {@link RouteSpec}s, and this file alone matches a request to one: by its path segments first,
 * then its method, so a path that exists answers 405 with `Allow` (GET implies HEAD) and one that
 * does not answers 404, the same way everywhere. Each area keeps its own answer format (JSON
 * problems, HTML pages) and its own authentication, which the match result leaves to it.
 *
 * Segments are matched as the caller split and decoded them (the admin server splits the raw path
 * before decoding, so an id holding `%2F` stays one segment).
 *
 * @example
 *   const router = new AdminRouter([{ method: 'GET', path: '/runs/:id', handler: getRun }]);
 *   router.match('GET', ['runs', 'nightly-42']); // { kind: 'found', handler: getRun, params: { id: 'nightly-42' } }
 */

export type RouteMethod = 'GET' | 'POST';

export interface RouteSpec<H> {
  readonly method: RouteMethod;
  /**
   * `/literal/:name/…`: `:name` matches one non-empty segment, `:name(a|b)` only one of those
   * values; `/` alone is the one empty segment (a trailing slash).
   */
  readonly path: string;
  readonly handler: H;
}

export type RouteMatch<H> =
  | { readonly kind: 'found'; readonly handler: H; readonly params: Readonly<Record<string, string>> }
  | { readonly kind: 'wrong_method'; readonly allow: readonly string[] }
  | { readonly kind: 'not_found' };

type Segment =
  | { readonly literal: string }
  | { readonly param: string; readonly values: ReadonlySet<string> | null };

interface CompiledRoute<H> {
  readonly method: RouteMethod;
  readonly segments: readonly Segment[];
  readonly handler: H;
}

const PARAM = /^:([a-z][a-zA-Z0-9]*)(?:\(([a-z_|]+)\))?$/;

export class AdminRouter<H> {
  readonly #routes: readonly CompiledRoute<H>[];

  constructor(routes: readonly RouteSpec<H>[]) {
    this.#routes = Object.freeze(routes.map(compile));
  }

  /** The route for `method` (HEAD counts as GET) and the decoded `segments`, or why there is none. */
  match(method: string | undefined, segments: readonly string[]): RouteMatch<H> {
    const wanted = method === 'HEAD' ? 'GET' : method;
    const allow = new Set<string>();
    for (const route of this.#routes) {
      const params = paramsOf(route.segments, segments);
      if (params === null) continue;
      if (route.method === wanted) return { kind: 'found', handler: route.handler, params };
      if (route.method === 'GET') allow.add('GET').add('HEAD');
      else allow.add(route.method);
    }
    return allow.size === 0 ? { kind: 'not_found' } : { kind: 'wrong_method', allow: [...allow] };
  }
}

function compile<H>(spec: RouteSpec<H>): CompiledRoute<H> {
  if (!spec.path.startsWith('/')) throw new Error(`admin route ${spec.path} must start with /`);
  const segments = spec.path
    .slice(1)
    .split('/')
    .map((s): Segment => {
      const p = PARAM.exec(s);
      if (p === null) {
        if (s.startsWith(':')) throw new Error(`admin route ${spec.path}: bad parameter ${s}`);
        return { literal: s };
      }
      return { param: p[1]!, values: p[2] === undefined ? null : new Set(p[2].split('|')) };
    });
  return { method: spec.method, segments, handler: spec.handler };
}

function paramsOf(pattern: readonly Segment[], segments: readonly string[]): Record<string, string> | null {
  if (pattern.length !== segments.length) return null;
  const params: Record<string, string> = Object.create(null) as Record<string, string>;
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    const s = segments[i]!;
    if ('literal' in p) {
      if (p.literal !== s) return null;
    } else {
      if (s === '' || (p.values !== null && !p.values.has(s))) return null;
      params[p.param] = s;
    }
  }
  return params;
}
