/**
 * Agent read-backs (issue 13 item 3; DESIGN.md §3 "Observations": "a read-back the agent made").
 * When an agent itself sends the request a tool's `reconcile` lookup describes (e.g.
 * `GET /repos/acme/app/issues?state=all`) while that tool has an `unknown` operation in the
 * agent's scope, the answer is evidence about that operation: it is recorded as a `read_back`
 * observation, judged by the lookup's `match` rules, and settles the operation when it finds the
 * item once (succeeded) or more than once (duplicate_effect_confirmed). The agent's request is
 * answered as it would be anyway; the observing happens after, off its path.
 *
 * Which operation a read-back is about is told from what the store keeps of it, its key values:
 * a tool is read-back capable when every `{capture}` of its lookup path and every `match`
 * argument is one of its `dedupe.key` paths (`$.path.owner`, `$.body.title`). Its read-back must
 * go to the origin of the operation's attempts, with exactly the lookup's path and query.
 */
import type { Tool } from '../policy/index.js';
import type { ObservationInput, OperationRecord, Scope, Store } from '../store/index.js';
import { canonicalJson, hmacRef } from './canonical-json.js';
import { type Expected, judge } from './reconcile-lookup.js';
import type { GateRequest, GateRequestHead, UpstreamResult } from './types.js';

/** A tool whose lookup an agent's request can be, compiled once at policy load. */
interface ReadBackRoute {
  readonly tool: Tool;
  readonly method: string;
  /** The lookup path's shape, captures as one segment each. */
  readonly shape: RegExp;
  readonly pathTemplate: string;
  /** `name=value` pairs of the template's query, values possibly `{capture}`. */
  readonly query: readonly (readonly [string, string])[];
  /** For each capture name and each match argument, its index in the key values. */
  readonly keyIndex: ReadonlyMap<string, number>;
}

/** How long the unknown operations of one tool in one scope are remembered between read-backs. */
const CANDIDATES_TTL_MS = 1000;
/** At most this many unknown operations are judged by one read-back. */
const MAX_CANDIDATES = 50;

export class ReadBacks {
  readonly #routes: readonly ReadBackRoute[];
  readonly #candidates = new Map<string, { readonly at: number; readonly ops: Promise<OperationRecord[]> }>();

  constructor(tools: readonly Tool[]) {
    this.#routes = tools.flatMap((t) => {
      const r = compile(t);
      return r === null ? [] : [r];
    });
  }

  /** The tools whose lookup this request may be (no store, no allocation when there are none). */
  toolsFor(head: GateRequestHead): readonly ReadBackRoute[] {
    if (this.#routes.length === 0) return [];
    return this.#routes.filter((r) => r.method === head.method && r.shape.test(head.path));
  }

  /**
   * Judges a delivered answer against the tools' unknown operations in the request's scope and
   * records what it shows. Never throws for what the destination answered; store errors reject.
   */
  async observe(
    routes: readonly ReadBackRoute[],
    request: GateRequest,
    scope: Scope,
    runId: string,
    sent: UpstreamResult,
    store: Store,
    fingerprintKey: string,
  ): Promise<number> {
    if (sent.kind !== 'response' || sent.status < 200 || sent.status > 299) return 0;
    let recorded = 0;
    for (const route of routes) {
      const ops = await this.#unknownOf(route.tool, scope, store);
      for (const op of ops) {
        const values = op.keyValues;
        const last = op.attempts.at(-1);
        if (values === null || last === undefined) continue;
        if (last.request.host !== request.host || last.request.port !== request.port) continue;
        if (!sameLookup(route, values, request)) continue;
        const expected: Expected[] = route.tool.reconcile!.match.map((m) => ({
          m,
          value: values[route.keyIndex.get(m.argument.expression)!],
        }));
        const outcome = judge(route.tool, sent.status, sent.body, expected);
        // Not the list the tool describes: says nothing about the operation.
        if (outcome.result === 'inconclusive') continue;
        const input: ObservationInput = {
          operationId: op.id,
          kind: 'read_back',
          by: `agent read-back (run ${runId})`,
          reason: `${request.method} ${route.pathTemplate}: ${outcome.matches} matching item(s)`,
          settles:
            outcome.result === 'match'
              ? 'succeeded'
              : outcome.result === 'multiple'
                ? 'duplicate_effect_confirmed'
                : null,
          status: sent.status,
          destinationRef: outcome.remoteRefs[0] ?? null,
          refs:
            outcome.result === 'multiple' ? outcome.remoteRefs.filter((r): r is string => r !== null) : [],
          payloadFingerprint: hmacRef(
            fingerprintKey,
            canonicalJson(JSON.parse(new TextDecoder().decode(sent.body))),
          ),
          source: 'gate',
        };
        const result = await store.addObservation(input);
        if (!result.alreadyRecorded) recorded++;
        if (result.stateChange !== null) this.#candidates.delete(candidatesKey(route.tool, scope));
      }
    }
    return recorded;
  }

  /** The tool's unknown operations in the scope, remembered for a second (one query per tool and scope). */
  #unknownOf(tool: Tool, scope: Scope, store: Store): Promise<OperationRecord[]> {
    const key = candidatesKey(tool, scope);
    const now = performance.now();
    const cached = this.#candidates.get(key);
    if (cached !== undefined && now - cached.at < CANDIDATES_TTL_MS) return cached.ops;
    const ops = store
      .listOperations({ state: 'unknown', toolId: tool.id, tenant: scope.tenant, limit: MAX_CANDIDATES })
      .then((list) => list.filter((o) => o.scope.area === scope.area && o.scope.agent === scope.agent));
    ops.catch(() => this.#candidates.delete(key));
    this.#candidates.set(key, { at: now, ops });
    return ops;
  }
}

function candidatesKey(tool: Tool, scope: Scope): string {
  return JSON.stringify([tool.id, scope.tenant, scope.area, scope.agent]);
}

function compile(tool: Tool): ReadBackRoute | null {
  const reconcile = tool.reconcile;
  if (reconcile === null || tool.dedupe === null) return null;
  const keyPaths = tool.dedupe.key.map((k) => k.expression);
  const keyIndex = new Map<string, number>();
  const q = reconcile.path.indexOf('?');
  const pathTemplate = q === -1 ? reconcile.path : reconcile.path.slice(0, q);
  const query = q === -1 ? [] : [...new URLSearchParams(reconcile.path.slice(q + 1))];
  for (const name of [...reconcile.path.matchAll(/\{([^}]*)\}/g)].map((m) => m[1]!)) {
    const i = keyPaths.indexOf(`$.path.${name}`);
    if (i === -1) return null;
    keyIndex.set(name, i);
  }
  for (const m of reconcile.match) {
    const i = keyPaths.indexOf(m.argument.expression);
    if (i === -1) return null;
    keyIndex.set(m.argument.expression, i);
  }
  const shape = new RegExp(
    `^${pathTemplate
      .split(/(\{[^}]*\})/)
      .map((part) => (part.startsWith('{') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('')}$`,
  );
  return { tool, method: reconcile.method, shape, pathTemplate, query, keyIndex };
}

/** The request is the operation's lookup: its path filled with the key values, every lookup query parameter present. */
function sameLookup(route: ReadBackRoute, values: readonly unknown[], request: GateRequest): boolean {
  const fill = (text: string): string | null => {
    let ok = true;
    const out = text.replace(/\{([^}]*)\}/g, (_whole, name: string) => {
      const v = values[route.keyIndex.get(name)!];
      if (typeof v !== 'string' && typeof v !== 'number') ok = false;
      return encodeURIComponent(String(v));
    });
    return ok ? out : null;
  };
  const path = fill(route.pathTemplate);
  if (path === null || !samePath(path, request.path)) return false;
  // Exactly the lookup's query: an extra parameter (a page, a filter, per_page=1) could hide a
  // second copy of the effect and pass a duplicate off as one match.
  const given = [...new URLSearchParams(request.query)].map(([k, v]) => `${k}=${v}`).sort();
  const wanted: string[] = [];
  for (const [k, v] of route.query) {
    const want = fill(v);
    if (want === null) return false;
    wanted.push(`${k}=${decodeURIComponent(want)}`);
  }
  wanted.sort();
  return given.length === wanted.length && given.every((g, i) => g === wanted[i]);
}

/** Compared decoded: the request's path is normalized (unreserved characters decoded), the filled one encoded. */
function samePath(filled: string, requested: string): boolean {
  try {
    return decodeURIComponent(filled) === decodeURIComponent(requested);
  } catch {
    return false;
  }
}
