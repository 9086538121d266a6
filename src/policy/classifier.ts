import { type HostPattern, hostMatches } from './host-pattern.js';
import { RouteMatcher } from './route-matcher.js';
import type { Classification, PolicySet, RouteInput, Tool } from './types.js';

/** One tool reachable through one host key of the index. */
interface Entry {
  readonly tool: Tool;
  readonly matcher: RouteMatcher;
  /** The tool's host patterns under this key (several when ports differ). */
  readonly patterns: HostPattern[];
}

interface WildcardBucket {
  /** `.example.com`: the host must end with it and be longer. */
  readonly suffix: string;
  readonly entries: Entry[];
}

const NONE: readonly Classification[] = Object.freeze([]);

/**
 * Decides which tools a request may be. It runs on every proxied request, so everything is
 * indexed at construction: exact hosts in a Map, `*.suffix` wildcards in a short list. A request
 * to a host no tool names is answered with a shared frozen empty array and allocates nothing.
 *
 * Candidates come in selection order: tools with `match.body` conditions first (they are the more
 * specific claim on a shared endpoint such as MCP's `POST /mcp`), then declaration order.
 *
 * @example
 * const classifier = new Classifier(await loadPolicies('policies/'));
 * const candidates = classifier.candidates({ host: 'api.github.com', port: 443, method: 'POST', path: '/repos/acme/api/issues' });
 * const chosen = classifier.select(candidates, { title: 'Bug' }); // github.create_issue, params { owner: 'acme', repo: 'api' }
 */
export class Classifier {
  readonly #exact = new Map<string, Entry[]>();
  readonly #wildcards: WildcardBucket[] = [];
  /** Tools whose matcher was not compiled by this module (hand-built sets): checked one by one. */
  readonly #opaque: Tool[] = [];
  readonly #rank = new Map<Tool, number>();

  constructor(set: PolicySet) {
    const ordered = [...set.tools.entries()].sort(
      ([ia, a], [ib, b]) => Number(b.match.hasBodyConditions) - Number(a.match.hasBodyConditions) || ia - ib,
    );
    for (const [rank, [, tool]] of ordered.entries()) {
      this.#rank.set(tool, rank);
      const matcher = tool.match;
      if (!(matcher instanceof RouteMatcher)) {
        this.#opaque.push(tool);
        continue;
      }
      for (const pattern of matcher.hosts) {
        let entries: Entry[];
        if (pattern.kind === 'exact') {
          entries = this.#exact.get(pattern.host) ?? [];
          this.#exact.set(pattern.host, entries);
        } else {
          let bucket = this.#wildcards.find((b) => b.suffix === pattern.host);
          if (bucket === undefined) {
            bucket = { suffix: pattern.host, entries: [] };
            this.#wildcards.push(bucket);
          }
          entries = bucket.entries;
        }
        const existing = entries.find((e) => e.tool === tool);
        if (existing === undefined) entries.push({ tool, matcher, patterns: [pattern] });
        else existing.patterns.push(pattern);
      }
    }
  }

  /** Tools whose host, method and path match the request head (no body needed), in selection order. */
  candidates(input: RouteInput): readonly Classification[] {
    const host = input.host;
    let out: Classification[] | null = null;
    const exact = this.#exact.get(host);
    if (exact !== undefined) out = collect(exact, input, out);
    for (const bucket of this.#wildcards) {
      if (host.length > bucket.suffix.length && host.endsWith(bucket.suffix))
        out = collect(bucket.entries, input, out);
    }
    for (const tool of this.#opaque) {
      const m = tool.match.matchRoute(input);
      if (m === null || out?.some((c) => c.tool === tool)) continue;
      out ??= [];
      out.push(Object.freeze({ tool, params: m.params }));
    }
    if (out === null) return NONE;
    if (out.length > 1) out.sort((a, b) => (this.#rank.get(a.tool) ?? 0) - (this.#rank.get(b.tool) ?? 0));
    return Object.freeze(out);
  }

  /**
   * The first candidate whose `match.body` conditions hold for the parsed JSON body (`undefined`
   * when the body is not JSON, which only tools without body conditions accept); `null` if none.
   */
  select(candidates: readonly Classification[], body: unknown): Classification | null {
    for (const c of candidates) if (c.tool.match.matchesBody(body)) return c;
    return null;
  }

  /**
   * Whether any tool names `host` (lower case, no port): a cheap pre-check before the proxy
   * looks at anything else. A bound property so it can be passed around as a callback.
   */
  readonly mayGovern = (host: string): boolean => {
    if (this.#opaque.length > 0 || this.#exact.has(host)) return true;
    for (const bucket of this.#wildcards) {
      if (host.length > bucket.suffix.length && host.endsWith(bucket.suffix)) return true;
    }
    return false;
  };
}

function collect(
  entries: readonly Entry[],
  input: RouteInput,
  out: Classification[] | null,
): Classification[] | null {
  let result = out;
  for (const entry of entries) {
    if (!anyHostMatches(entry.patterns, input.host, input.port)) continue;
    const params = entry.matcher.matchMethodAndPath(input);
    if (params === null) continue;
    // A tool can be reached through an exact name and a wildcard at once: list it once.
    if (result?.some((c) => c.tool === entry.tool)) continue;
    result ??= [];
    result.push(Object.freeze({ tool: entry.tool, params }));
  }
  return result;
}

function anyHostMatches(patterns: readonly HostPattern[], host: string, port: number): boolean {
  for (const p of patterns) if (hostMatches(p, host, port)) return true;
  return false;
}
