import type { Classification, Classifier, Tool, VerdictProtocol } from '../policy/index.js';
import type { BlockInput, DedupeKeyInput, Scope } from '../store/index.js';
import { type ArgumentDocument, buildArgumentDocument, contentTypeOf } from './argument-document.js';
import { ArgumentRefusal } from './argument-refusal.js';
import { bodyLabel, readsAsFields } from './body-label.js';
import { keyPathReachedByFolding } from './folded-reading.js';
import { governedMutation } from './graphql-request.js';
import { agentIdempotencyKey } from './idempotency-key.js';
import type { BodyLimits } from './json-scan.js';
import { refuseDisagreeingMcpHeaders } from './mcp-routing-headers.js';
import { bracketedReading } from './nested-parameters.js';
import type { TRANSPORT_PROBLEMS } from './problem-response.js';
import { refuseRepeatedKeyArguments } from './repeated-arguments.js';
import { authorityRef, requestFingerprint } from './request-fingerprint.js';
import { bodyNamesMethod, type HeadRoute, type RouteClassifier } from './route-classifier.js';
import { redactedPath } from './secret-captures.js';
import { buildSemanticKey } from './semantic-key.js';
import { type TaskRead, taskReadOf } from './task-read.js';
import type { GateRequest } from './types.js';
import { foldedMatch, unreadableBody } from './unclassified-body.js';
import { jsonRpcId } from './verdict-response.js';

/** What a proposal needs besides the request: the same on the event loop and in an analysis worker. */
export interface ProposalContext {
  readonly classifier: Classifier;
  readonly routes: RouteClassifier;
  readonly scope: Scope;
  readonly authorityKey: string | null;
  readonly maxDuplicateSkips: number;
  readonly bodyLimits: BodyLimits;
}

export type DecideCommon = Omit<BlockInput, 'kind' | 'decisionId' | 'reason'>;

/** A classified, keyed proposal, built before any store round trip. */
export interface Proposal {
  readonly tool: Tool;
  readonly args: ArgumentDocument;
  /** The JSON-RPC `id` of the request body (what a JSON-RPC verdict answers with), else null. */
  readonly rpcId: string | number | null;
  /**
   * A `match.graphql` tool's mutation field and the name its answer comes under in `data` (the
   * alias, if any), else null: plain data, so it crosses from an analysis worker as it is.
   */
  readonly graphql: { readonly field: string; readonly responseName: string } | null;
  readonly common: DecideCommon;
  readonly key: DedupeKeyInput | null;
  readonly keyError: string | null;
  /** Refuse (record a `block`): the key cannot be built and the tool does not let it through. */
  readonly block: boolean;
  /** The idempotency key the agent sent itself, where the tool's destination reads one (idempotency-key.ts). */
  readonly agentIdempotencyKey: string | null;
}

/** Everything the gate can say about a governed request without its store. */
export type Proposed =
  | { readonly kind: 'proposal'; readonly proposal: Proposal }
  /** Refused before the store, nothing sent; `path` names the argument when there is one. */
  | {
      readonly kind: 'refused';
      readonly problem: keyof typeof TRANSPORT_PROBLEMS;
      readonly detail: string;
      readonly path: string | null;
      /** Set when the refusal is answered as a JSON-RPC error to this request id. */
      readonly rpcId?: string | number | null;
      /**
       * The dialect every candidate tool of the route speaks, so the refusal is answered as that
       * API's SDK reads it (`refusal-dialects.ts`); `http` when they differ or there are none.
       */
      readonly protocol?: VerdictProtocol;
    }
  /** A route matched but no tool's body conditions did, and the body was read: relay it. */
  /** `taskRead`: an MCP task read on a governed route, whose answer may settle an accepted operation. */
  | { readonly kind: 'unclassified'; readonly taskRead?: TaskRead };

/**
 * The tool, its arguments, the trail facts and the semantic key of a request that `route()` sent
 * to `handle()`. Pure and synchronous: `ProposalPool` runs it on a worker thread for large bodies,
 * where it is the costly part of a governed request (parsing, canonical JSON, hashing), so that
 * one client's megabyte never stalls the event loop every other request waits on.
 */
export function propose(ctx: ProposalContext, request: GateRequest): Proposed {
  const proposed = proposeOrRefuse(ctx, request);
  if (proposed.kind !== 'refused') return proposed;
  return { ...proposed, protocol: routeProtocol(ctx, request) };
}

function proposeOrRefuse(ctx: ProposalContext, request: GateRequest): Proposed {
  try {
    return classify(ctx, request);
  } catch (err) {
    // Ambiguous or too complex arguments: refused before any store round trip, nothing sent.
    if (err instanceof ArgumentRefusal) {
      return { kind: 'refused', problem: err.problem, detail: err.message, path: err.path };
    }
    // Arguments the gate cannot represent (e.g. JSON nested too deep to canonicalize) are the
    // client's problem, not a store outage: answer 400 so the agent fixes the call.
    return {
      kind: 'refused',
      problem: 'bad_request',
      detail: `The gate cannot read this request's arguments (${err instanceof Error ? err.message : String(err)}). Nothing was sent.`,
      path: null,
    };
  }
}

/**
 * The dialect of a refused request's route, read from its head alone (the body is what was
 * refused): the one every candidate tool speaks, else `http`, since an answer in one API's shape
 * would be misread by another's client.
 */
function routeProtocol(ctx: ProposalContext, request: GateRequest): VerdictProtocol {
  let candidates: readonly Classification[];
  try {
    candidates = ctx.routes.classify(request).candidates;
  } catch {
    return 'http';
  }
  const protocols = new Set(candidates.map((c) => c.tool.verdict.protocol));
  const [only] = protocols;
  return protocols.size === 1 && only !== undefined ? only : 'http';
}

function classify(ctx: ProposalContext, request: GateRequest): Proposed {
  const headRoute = ctx.routes.classify(request);
  // Media types the route's own tools declare their destination reads as JSON.
  const jsonTypes = declaredJsonTypes(headRoute.candidates);
  const args0 = buildArgumentDocument(request, {}, ctx.bodyLimits, jsonTypes);
  // Classified again only when the body may name another method than the head did.
  const route = bodyNamesMethod(args0.body) ? ctx.routes.classify(request, args0.body) : headRoute;
  // A body's `_method` may send a server to another governed route than the head does.
  if (route.conflict !== null) throw ArgumentRefusal.ambiguousRoute(route.conflict);
  if (route.candidates.length > 0) {
    try {
      refuseDisagreeingMcpHeaders(request, args0.body);
    } catch (err) {
      // Answered as the MCP server itself would: 400 with a JSON-RPC error for this request's id.
      if (!(err instanceof ArgumentRefusal)) throw err;
      return {
        kind: 'refused',
        problem: err.problem,
        detail: err.message,
        path: err.path,
        rpcId: jsonRpcId(args0.body),
      };
    }
  }
  // On an endpoint that carries every mutation, the document says which one this is.
  const mutation = governedMutation(request, args0.body, route.candidates, ctx.bodyLimits);
  const chosen = ctx.classifier.select(route.candidates, args0.body, mutation?.name ?? null);
  if (chosen === null) return unclassified(request, args0.body, route.candidates);
  // Polling a task is a read, never a proposal (MCP Tasks): however broadly a tool matches, the
  // agent asking how its accepted call is going must not be answered "duplicate".
  if (chosen.tool.verdict.protocol === 'jsonrpc' && isTaskRead(args0.body)) {
    return passedUnclassified(args0.body, route.candidates);
  }
  const tool = chosen.tool;
  const isGraphql = mutation !== null && (tool.match.graphqlMutation ?? null) !== null;
  const args: ArgumentDocument = isGraphql
    ? { ...args0, path: chosen.params, graphql: { field: mutation.name, args: mutation.args } }
    : { ...args0, path: chosen.params };
  const graphql = isGraphql ? { field: mutation.name, responseName: mutation.responseName } : null;
  refuseRepeatedKeyArguments(tool, request, args);
  const scope = request.scope ?? ctx.scope;
  const ctxHeaders = request.context;
  const common: DecideCommon = {
    // '' until the gate derives the run of a request that names none (Gate, run-identity.ts).
    runId: ctxHeaders.run ?? '',
    step: ctxHeaders.step,
    worker: ctxHeaders.worker,
    agentVersion: ctxHeaders.agentVersion,
    scope,
    toolId: tool.id,
    explain: tool.match.explain(),
    maxDuplicateSkips: ctx.maxDuplicateSkips,
    request: {
      scheme: request.scheme,
      method: route.method,
      host: request.host,
      port: request.port,
      path: redactedPath(request.path, tool, chosen.params),
      route: routeFact(tool, route, request.method, request.host),
      fingerprint: requestFingerprint(request, tool, args),
      authorityRef: authorityRef(request.headers, ctx.authorityKey),
    },
  };
  const rpcId = jsonRpcId(args.body);
  // A tool in shadow mode sends the request as written and refuses nothing.
  const agentKey = tool.mode === 'shadow' ? null : agentIdempotencyKey(request, tool, args);
  const proposal = (p: Omit<Proposal, 'agentIdempotencyKey'>): Proposed => ({
    kind: 'proposal',
    proposal: { ...p, agentIdempotencyKey: agentKey },
  });
  if (tool.dedupe === null)
    return proposal({ tool, args, rpcId, graphql, common, key: null, keyError: null, block: false });
  const k = buildSemanticKey(tool, scope, args, ctx.authorityKey);
  if (!k.ok && k.reason === 'key_path_missing') {
    // Refused whatever on_missing says: the destination may read the argument the gate missed.
    const folded = keyPathReachedByFolding(args, k.paths);
    if (folded !== null) throw ArgumentRefusal.foldedMember(folded, tool.id);
  }
  if (k.ok) {
    const key = {
      hash: k.hash,
      values: k.values,
      windowMs: tool.dedupe.windowMs,
      pendingTtlMs: tool.dedupe.pendingTtlMs,
    };
    return proposal({ tool, args, rpcId, graphql, common, key, keyError: null, block: false });
  }
  // An unrepresentable value is refused whatever on_missing says: letting it through would
  // govern nothing while claiming to.
  const block = tool.dedupe.onMissing === 'block' || k.reason === 'key_value_invalid';
  return proposal({
    tool,
    args,
    rpcId,
    graphql,
    common,
    key: null,
    keyError: `${k.reason}: ${k.paths.join(', ')}`,
    block,
  });
}

/**
 * A route matched but no tool's body conditions did: unclassified, unless the gate could not read
 * the body at all (a destination may: it inflates gzip, decodes UTF-16, accepts NaN or a batch),
 * or the conditions hold but for letter case in member names (`"Name"` for `name`, which a
 * case-insensitive binder reads as the tool's call). Either way it would walk past its tool.
 */
function unclassified(request: GateRequest, body: unknown, candidates: readonly Classification[]): Proposed {
  const unreadable = unreadableBody(request, body);
  if (unreadable !== null) {
    return {
      kind: 'refused',
      problem: 'body_unreadable',
      detail: `This route's tools are chosen by the request body, and the gate cannot read this one (${unreadable}). Send one uncompressed UTF-8 JSON object per request. Nothing was sent.`,
      path: null,
    };
  }
  const folded = foldedMatch(body, candidates);
  if (folded !== null) {
    return {
      kind: 'refused',
      problem: 'arguments_ambiguous',
      detail: `The body matches the conditions of tool ${folded} only if member names are read without letter case, as some servers read them. Spell the members as the API does. Nothing was sent.`,
      path: null,
    };
  }
  // A form whose bracketed names (`params[name]=…`) Rails, PHP and qs nest into the tool's call.
  const nested = readsAsFields(bodyLabel(contentTypeOf(request))) ? bracketedReading(body) : null;
  const byNesting = nested === null ? undefined : candidates.find((c) => c.tool.match.matchesBody(nested));
  if (byNesting !== undefined) {
    return {
      kind: 'refused',
      problem: 'arguments_ambiguous',
      detail: `The form body matches the conditions of tool ${byNesting.tool.id} when its bracketed names (name[member]=…) are nested, as Rails, PHP and qs nest them. Send the call as a JSON body (Content-Type: application/json). Nothing was sent.`,
      path: null,
    };
  }
  return passedUnclassified(body, candidates);
}

/**
 * Unclassified, passed as it is; a `tasks/get` or `tasks/result` on a route `jsonrpc` tools govern
 * carries the task read, whose answer may settle one of their accepted operations (task-read.ts).
 * Only such a request costs the store a lookup: other ungoverned traffic none.
 */
function passedUnclassified(body: unknown, candidates: readonly Classification[]): Proposed {
  const toolIds = candidates.filter((c) => c.tool.verdict.protocol === 'jsonrpc').map((c) => c.tool.id);
  const taskRead = toolIds.length === 0 ? null : taskReadOf(body, toolIds);
  return taskRead === null ? { kind: 'unclassified' } : { kind: 'unclassified', taskRead };
}

/** MCP's task reads (`tasks/get`, `tasks/result`, `tasks/list`): they ask, they do nothing. */
const TASK_READS: ReadonlySet<string> = new Set(['tasks/get', 'tasks/result', 'tasks/list']);

function isTaskRead(body: unknown): boolean {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
  const method = (body as Record<string, unknown>)['method'];
  return typeof method === 'string' && TASK_READS.has(method);
}

const NO_TYPES: ReadonlySet<string> = new Set();

function declaredJsonTypes(candidates: readonly Classification[]): ReadonlySet<string> {
  const types = candidates.flatMap((c) => c.tool.match.jsonTypes ?? []);
  return types.length === 0 ? NO_TYPES : new Set(types);
}

/** The tool's route, plus how this request reached it when it was not by its plain spelling. */
function routeFact(tool: Tool, route: HeadRoute, sentMethod: string, host: string): string {
  const notes: string[] = [];
  if (route.override !== null)
    notes.push(`sent as ${sentMethod} with ${route.override.source}: ${route.method}`);
  if (route.resolvedHost !== null) notes.push(`addressed as ${host}, classified as ${route.resolvedHost}`);
  const explain = tool.match.explain();
  return notes.length === 0 ? explain : `${explain} (${notes.join('; ')})`;
}
