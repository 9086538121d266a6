/**
 * Agent read-backs (docs/design.md §3 "Observations": an agent's read-back is evidence).
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
 *
 * Only what the answer can speak for is settled: the operation's attempts as they were when the
 * read-back was sent (the store refuses the settlement when a later attempt exists: it may have
 * made a second copy the answer predates); the path compared segment by segment (`a%2Fb` is one
 * segment, never two); every attempt to the read-back's own scheme, host and port.
 */
import type { Tool } from '../policy/index.js';
import type { ObservationInput, OperationRecord, Scope, Store } from '../store/index.js';
import { canonicalJson, hmacRef } from './canonical-json.js';
import { type Expected, judgeParsed, NOT_JSON, parseAnswer } from './reconcile-lookup.js';
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
  /** Their names, sorted. */
  readonly queryNames: readonly string[];
  /** For each capture name and each match argument, its index in the key values. */
  readonly keyIndex: ReadonlyMap<string, number>;
}

/** How long the unknown operations of one tool in one scope are remembered between read-backs. */
const CANDIDATES_TTL_MS = 1000;
/** At most this many unknown operations are judged by one read-back. */
const MAX_CANDIDATES = 50;
/** How many judged (operation, answer) pairs are remembered. */
const MAX_SEEN = 10_000;
/** How many (tool, scope) candidate lists are kept at once. */
const MAX_CANDIDATE_SETS = 1_000;

/** What `begin` started: the candidate operations of each tool, read as the request was sent. */
export interface PendingReadBack {
  readonly routes: readonly ReadBackRoute[];
  readonly scope: Scope;
  readonly candidates: readonly Promise<OperationRecord[]>[];
}

const NONE: readonly ReadBackRoute[] = Object.freeze([]);

export class ReadBacks {
  readonly #routes: readonly ReadBackRoute[];
  readonly #candidates = new Map<string, { readonly at: number; readonly ops: Promise<OperationRecord[]> }>();
  /** `<operation> <answer fingerprint>` pairs already judged (bounded, oldest out first). */
  readonly #seen = new Set<string>();

  constructor(tools: readonly Tool[]) {
    this.#routes = tools.flatMap((t) => {
      const r = compile(t);
      return r === null ? [] : [r];
    });
  }

  /**
   * The tools whose lookup this request may be: the lookup's method, path shape and query
   * parameters, to a host the tool names (no store; no allocation when no tool has a lookup).
   * Such a request is buffered instead of streamed, so the test is as narrow as it can be here.
   */
  toolsFor(head: GateRequestHead): readonly ReadBackRoute[] {
    // Asked of every request no tool governs: nothing allocated unless one may be a lookup.
    let found: ReadBackRoute[] | null = null;
    for (const r of this.#routes) {
      if (r.method !== head.method || !r.shape.test(head.path)) continue;
      if (!r.tool.match.matchesHost(head.host, head.port) || !sameQueryNames(r, head.query)) continue;
      if (acceptsEventStream(head)) return NONE;
      found ??= [];
      found.push(r);
    }
    return found ?? NONE;
  }

  /**
   * Starts reading the tools' unknown operations as the read-back is sent (what they were then
   * is what its answer can speak for); `observe` takes the result.
   */
  begin(routes: readonly ReadBackRoute[], scope: Scope, store: Store): PendingReadBack {
    return { routes, scope, candidates: routes.map((r) => this.#unknownOf(r.tool, scope, store)) };
  }

  /**
   * Judges a delivered answer against the unknown operations `begin` read, and records what it
   * shows. Never throws for what the destination answered; store errors reject.
   */
  async observe(
    pending: PendingReadBack,
    request: GateRequest,
    runId: string,
    sent: UpstreamResult,
    store: Store,
    fingerprintKey: string,
  ): Promise<number> {
    if (sent.kind !== 'response' || sent.status < 200 || sent.status > 299) return 0;
    // One answer, parsed and fingerprinted once, however many operations it is judged against.
    const json = parseAnswer(sent.body);
    if (json === NOT_JSON) return 0;
    let fingerprint: string | null = null;
    let recorded = 0;
    for (const [i, route] of pending.routes.entries()) {
      const ops = await pending.candidates[i]!;
      for (const op of ops) {
        const values = op.keyValues;
        const last = op.attempts.at(-1);
        if (values === null || last === undefined) continue;
        if (!op.attempts.every((a) => sameOrigin(a.request, request))) continue;
        if (!sameLookup(route, values, request)) continue;
        const expected: Expected[] = route.tool.reconcile!.match.map((m) => ({
          m,
          value: values[route.keyIndex.get(m.argument.expression)!],
        }));
        const outcome = judgeParsed(route.tool, sent.status, json, expected);
        // Not the list the tool describes: says nothing about the operation.
        if (outcome.result === 'inconclusive') continue;
        fingerprint ??= hmacRef(fingerprintKey, canonicalJson(json));
        // A polling agent sends the same answer again and again: judged once per operation.
        const memo = `${op.id} ${fingerprint}`;
        if (this.#seen.has(memo)) continue;
        const input: ObservationInput = {
          operationId: op.id,
          kind: 'read_back',
          by: `agent read-back (run ${runId})`.slice(0, 200),
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
          payloadFingerprint: fingerprint,
          source: 'gate',
          asOfAttemptId: last.id,
        };
        // Claimed before the store call: polls whose observing runs at the same time judge it once.
        this.#remember(memo);
        let result: Awaited<ReturnType<Store['addObservation']>>;
        try {
          result = await store.addObservation(input);
        } catch (err) {
          this.#seen.delete(memo);
          throw err;
        }
        if (!result.alreadyRecorded) recorded++;
        if (result.stateChange !== null) this.#candidates.delete(candidatesKey(route.tool, pending.scope));
      }
    }
    return recorded;
  }

  #remember(memo: string): void {
    if (this.#seen.size >= MAX_SEEN) this.#seen.delete(this.#seen.keys().next().value!);
    this.#seen.add(memo);
  }

  /** Drops the remembered unknown operations of `tool` in `scope` (one just went unknown). */
  forget(tool: Tool, scope: Scope): void {
    if (this.#candidates.size > 0) this.#candidates.delete(candidatesKey(tool, scope));
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
    // A failed read is remembered as long as a good one: a store that is down is not asked by
    // every read-back (the caller logs the failure; the agent's answer is never held up by it).
    ops.catch(() => undefined);
    if (this.#candidates.size >= MAX_CANDIDATE_SETS) this.#candidates.clear();
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
  const queryNames = query.map(([k]) => k).sort();
  return { tool, method: reconcile.method, shape, pathTemplate, query, queryNames, keyIndex };
}

/** The request is the operation's lookup: its path, segment by segment, and exactly its query. */
function sameLookup(route: ReadBackRoute, values: readonly unknown[], request: GateRequest): boolean {
  const keyValueOf = (name: string): string | null => {
    const v = values[route.keyIndex.get(name)!];
    return typeof v === 'string' || typeof v === 'number' ? String(v) : null;
  };
  // Each segment decoded on its own: `acme%2Fa` is the one segment `acme/a`, never two.
  const want = route.pathTemplate.split('/');
  const got = request.path.split('/');
  if (want.length !== got.length) return false;
  for (let i = 0; i < want.length; i++) {
    const capture = /^\{([^}]*)\}$/.exec(want[i]!)?.[1];
    const expected = capture === undefined ? want[i]! : keyValueOf(capture);
    if (expected === null || decodeSegment(got[i]!) !== expected) return false;
  }
  // Exactly the lookup's query: an extra parameter (a page, a filter, per_page=1) could hide a
  // second copy of the effect and pass a duplicate off as one match.
  const given = [...new URLSearchParams(request.query)].map(([k, v]) => `${k}=${v}`).sort();
  const wanted: string[] = [];
  for (const [k, v] of route.query) {
    const capture = /^\{([^}]*)\}$/.exec(v)?.[1];
    const value = capture === undefined ? v : keyValueOf(capture);
    if (value === null) return false;
    wanted.push(`${k}=${value}`);
  }
  wanted.sort();
  return given.length === wanted.length && given.every((g, i) => g === wanted[i]);
}

function decodeSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/** The lookup's query parameter names, each once (values with captures are checked per operation). */
function sameQueryNames(route: ReadBackRoute, query: string): boolean {
  const names = [...new URLSearchParams(query).keys()].sort();
  return names.length === route.queryNames.length && names.every((n, i) => n === route.queryNames[i]);
}

/** An agent that asks for an event stream is not listing items: never buffered for a read-back. */
function acceptsEventStream(head: GateRequestHead): boolean {
  const accept = head.headers['accept'];
  return (Array.isArray(accept) ? accept.join(',') : (accept ?? ''))
    .toLowerCase()
    .includes('text/event-stream');
}

function sameOrigin(
  a: { readonly scheme: string; readonly host: string; readonly port: number },
  b: GateRequest,
): boolean {
  return a.scheme === b.scheme && a.host === b.host && a.port === b.port;
}
