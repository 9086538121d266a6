import { isIpLiteral } from './canonical-host.js';
import { type HostPattern, hostMatches } from './host-pattern.js';
import { LenientMatch, type LenientPath, lenientPath } from './lenient-match.js';
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
  /** The exact entries whose host is an IP literal (usually none). */
  readonly #byAddress: [string, Entry[]][] = [];
  /** Per tool, the path captures its key (and reconcile lookup) reads: what a lenient reading may not change. */
  readonly #keyed = new Map<Tool, ReadonlySet<string>>();

  constructor(set: PolicySet) {
    const ordered = [...set.tools.entries()].sort(
      ([ia, a], [ib, b]) => Number(b.match.hasBodyConditions) - Number(a.match.hasBodyConditions) || ia - ib,
    );
    for (const [rank, [, tool]] of ordered.entries()) {
      this.#rank.set(tool, rank);
      this.#keyed.set(tool, keyedCaptures(tool));
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
    for (const [host, entries] of this.#exact) if (isIpLiteral(host)) this.#byAddress.push([host, entries]);
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
   * when the body is not JSON, which only tools without body conditions accept) and, for a
   * `match.graphql` tool, whose mutation is `graphqlMutation` (the one root mutation field the
   * request performs, `null` when it performs none); `null` if none.
   */
  select(
    candidates: readonly Classification[],
    body: unknown,
    graphqlMutation: string | null = null,
  ): Classification | null {
    for (const c of candidates) {
      const m = c.tool.match;
      const graphql = m.graphqlMutation ?? null;
      if (graphql !== null && graphql !== graphqlMutation) continue;
      if (m.matchesBody(body)) return c;
    }
    return null;
  }

  /**
   * Whether any tool names `host` (canonical, see `canonicalHost`) on `port`: a cheap pre-check
   * before the proxy looks at anything else (CONNECT interception). An entry that says
   * `host:port` covers that port only; a plain entry covers every port (docs/policy-reference.md). Without
   * `port`, any port counts. A bound property so it can be passed around as a callback.
   */
  readonly mayGovern = (host: string, port?: number): boolean => {
    if (this.#opaque.length > 0) return true;
    const exact = this.#exact.get(host);
    if (exact !== undefined && anyEntryOnPort(exact, host, port)) return true;
    for (const bucket of this.#wildcards) {
      if (host.length > bucket.suffix.length && host.endsWith(bucket.suffix)) {
        if (anyEntryOnPort(bucket.entries, host, port)) return true;
      }
    }
    return false;
  };

  /**
   * A near miss: no tool matches `input` strictly, but one would if the path were read the way a
   * lenient server reads it (`lenientPath`, or a case-insensitive comparison). The first such
   * tool in selection order, or `null`. With `only`, just those tools (the strict candidates: is
   * one of them reached with other captures under a lenient reading?). Only tools on the
   * request's host and port are looked at, so a host no tool names costs a map lookup.
   */
  lenient(input: RouteInput, only?: readonly Classification[]): LenientMatch | null {
    const entries = this.#entriesOn(input.host, input.port);
    if (entries.length === 0) return null;
    let readingsOfPath: readonly LenientPath[] | null = null;
    let best: LenientMatch | null = null;
    for (const entry of entries) {
      if (only !== undefined && !only.some((c) => c.tool === entry.tool)) continue;
      if (best !== null && (this.#rank.get(entry.tool) ?? 0) >= (this.#rank.get(best.tool) ?? 0)) continue;
      // With and without a format suffix dropped: a route may have a dot of its own. Without a
      // dot in the path the two readings are the same one, read once.
      readingsOfPath ??= input.path.includes('.')
        ? [lenientPath(input.path, false), lenientPath(input.path)]
        : [lenientPath(input.path, false)];
      for (const lenient of readingsOfPath) {
        const readings = entry.matcher.matchLenient(
          input.method,
          input.path,
          lenient,
          this.#keyed.get(entry.tool) ?? null,
        );
        if (readings !== null) {
          best = new LenientMatch(entry.tool, readings);
          break;
        }
      }
    }
    return best;
  }

  /** Whether some tool on the request's host and port has this path, whatever its method. */
  governsPath(input: Omit<RouteInput, 'method'>): boolean {
    for (const entry of this.#entriesOn(input.host, input.port)) {
      if (entry.matcher.path.match(input.path) !== null) return true;
    }
    return false;
  }

  /**
   * The exact host names tools name (no IP literals, no wildcards): the names whose addresses
   * the engine resolves so that a request addressed by IP is still that host's (docs/design.md §4.1).
   */
  get exactNames(): readonly string[] {
    return [...this.#exact.keys()].filter((host) => !isIpLiteral(host));
  }

  /**
   * Whether some tool names a host by IP address on `port`: then a request to a *name* on that
   * port must be resolved before it is classified (it may be that address under another name).
   */
  readonly addressesGovernedOn = (port: number): boolean => {
    // Checked for every request to a name: a short list, empty unless some tool names an address.
    for (const [host, entries] of this.#byAddress) if (anyEntryOnPort(entries, host, port)) return true;
    return false;
  };

  /** Whether a tool names `host` literally (an exact entry, any port). */
  namesExactly(host: string): boolean {
    return this.#exact.has(host);
  }

  /** The entries on `host:port`, in index order: a list (no generator), allocated only when some are. */
  #entriesOn(host: string, port: number): readonly Entry[] {
    let out: Entry[] | null = null;
    const exact = this.#exact.get(host);
    if (exact !== undefined) out = collectOnPort(exact, host, port, out);
    for (const bucket of this.#wildcards) {
      if (host.length > bucket.suffix.length && host.endsWith(bucket.suffix)) {
        out = collectOnPort(bucket.entries, host, port, out);
      }
    }
    return out ?? NO_ENTRIES;
  }
}

const NO_ENTRIES: readonly Entry[] = Object.freeze([]);

/** Appends the entries on `host:port` to `out`, making the list only when the first one is found. */
function collectOnPort(
  entries: readonly Entry[],
  host: string,
  port: number,
  out: Entry[] | null,
): Entry[] | null {
  let list = out;
  for (const e of entries) {
    if (!anyHostMatches(e.patterns, host, port)) continue;
    if (list === null) list = [];
    list.push(e);
  }
  return list;
}

function anyEntryOnPort(entries: readonly Entry[], host: string, port: number | undefined): boolean {
  if (port === undefined) return entries.length > 0;
  for (const e of entries) if (anyHostMatches(e.patterns, host, port)) return true;
  return false;
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

/**
 * The path captures `tool`'s key paths and reconcile arguments read, found by evaluating them over
 * a document whose captures are distinct markers (no JSONPath re-implemented).
 */
function keyedCaptures(tool: Tool): ReadonlySet<string> {
  const markers = new Map<unknown, string>();
  const path: Record<string, object> = {};
  for (const name of tool.match instanceof RouteMatcher ? tool.match.path.captures : []) {
    const marker = {};
    markers.set(marker, name);
    path[name] = marker;
  }
  const paths = [...(tool.dedupe?.key ?? []), ...(tool.reconcile?.match.map((m) => m.argument) ?? [])];
  const out = new Set<string>();
  for (const p of paths) {
    for (const found of p.evaluate({ path, query: {}, body: {} })) {
      const name = markers.get(found);
      if (name !== undefined) out.add(name);
    }
  }
  return out;
}
