/**
 * The validated, frozen, defaulted form of `policies/*.yaml` (docs/design.md §4.1). Everything here is
 * produced once at load time; nothing on the request path re-validates it.
 */

export type Effect = 'read' | 'create' | 'set_state' | 'append' | 'notify' | 'destroy' | 'financial';
/** How verdicts are spoken to the tool's clients (src/engine/verdict-dialects.ts). */
export type VerdictProtocol = 'http' | 'jsonrpc' | 'stripe' | 'slack' | 'github' | 'graphql';
/** `shadow`: the tool's verdicts are recorded as would_* and nothing is refused (docs/design.md §2). */
export type ToolMode = 'enforce' | 'shadow';
export type DefaultAction = 'allow' | 'block';

/** Where a declaration came from, for error messages and the trail. */
export interface SourceLocation {
  readonly file: string;
  readonly line: number;
}

/**
 * A JSONPath compiled and checked at load time. `evaluate` runs jsonpath-plus with script
 * evaluation disabled and returns every match (an empty array when the path is absent).
 */
export interface CompiledPath {
  readonly expression: string;
  evaluate(document: unknown): unknown[];
  /**
   * Deletes every node the path matches from `document`, in place (array items are spliced out).
   * Used to leave volatile and secret fields out of request fingerprints.
   */
  remove(document: unknown): void;
}

/** The head of a request: everything classification needs except the body. */
export interface RouteInput {
  /** Lower-case host name without port; IPv6 literals without brackets. */
  readonly host: string;
  readonly port: number;
  /** Upper-case method. */
  readonly method: string;
  /** Decoded-as-sent path without the query string, e.g. `/repos/acme/api/issues`. */
  readonly path: string;
}

/** Result of a successful route match. */
export interface RouteMatch {
  /** `{name}` captures from the path template. */
  readonly params: Readonly<Record<string, string>>;
}

/**
 * A compiled `match` block. Route matching (host, method, path) needs only the request head; body
 * conditions need the parsed JSON body and are checked by `matchesBody`.
 */
export interface ToolMatcher {
  matchRoute(input: RouteInput): RouteMatch | null;
  /** Whether `match.hosts` names this host (and port, where an entry says `host:port`). */
  matchesHost(host: string, port: number): boolean;
  /** True when the tool declares `match.body` conditions (the body must be buffered to decide). */
  readonly hasBodyConditions: boolean;
  /** Checks `match.body` equality conditions against the parsed JSON body (true when none). */
  matchesBody(body: unknown): boolean;
  /** The same with member names compared without letter case (`foldedBody`: names lower-cased). */
  matchesBodyFolded(foldedBody: unknown): boolean;
  /** Human-readable reason, recorded in the trail: e.g. `POST api.github.com /repos/{owner}/{repo}/issues`. */
  explain(): string;
  /** Media types besides `application/json` the destination reads as JSON (`match.json_types`). */
  readonly jsonTypes?: readonly string[];
  /** The GraphQL root mutation field the tool is (`match.graphql.mutation`); absent or `null`: none. */
  readonly graphqlMutation?: string | null;
}

/**
 * One condition on a destination's JSON answer (`outcome.failed_if`, `outcome.unknown_if`): a
 * JSONPath and what one of the values it selects must be.
 */
export interface AnswerCondition {
  readonly path: CompiledPath;
  /** `equals`: the same JSON value, type included (`false` is not `"false"`); `non_empty`: not null, "", [] or {}. */
  readonly test:
    | { readonly kind: 'equals'; readonly value: string | number | boolean | null }
    | { readonly kind: 'non_empty' };
  /** `$.ok == false`, `$.job non_empty`: what the trail records as the rule that decided. */
  readonly text: string;
}

/** The conditions of one list (answer-conditions.ts); any one that holds decides. Frozen. */
export interface AnswerConditions {
  readonly conditions: readonly AnswerCondition[];
  /** The text of the first condition that holds for `answer` (a parsed JSON body), or `null`. */
  match(answer: unknown): string | null;
  /** All conditions, for logs and `policies` output: `$.ok == false or $.error non_empty`. */
  explain(): string;
}

/** A status selector from `outcome`: a class like `2xx` or an exact code like `409`. */
export type StatusSelector =
  | { readonly kind: 'class'; readonly hundreds: number }
  | { readonly kind: 'code'; readonly code: number };

export type OutcomeClass = 'succeeded' | 'failed' | 'unknown';

export interface OutcomeContract {
  readonly succeeded: readonly StatusSelector[];
  readonly failed: readonly StatusSelector[];
  readonly unknown: readonly StatusSelector[];
  /**
   * What an MCP tool execution error (`result.isError: true` in an HTTP 2xx JSON-RPC response)
   * means for the operation, `outcome.tool_error` (JSON-RPC tools only); default `failed`.
   */
  readonly toolError: OutcomeClass;
  /**
   * `outcome.failed_if`: conditions on the JSON answer that make a response the status calls
   * succeeded a failure (Slack's `{"ok": false}` in a 200); `null` when the policy names none.
   */
  readonly failedIf: AnswerConditions | null;
  /** `outcome.unknown_if`: the same, making it unknown; checked before `failedIf`. */
  readonly unknownIf: AnswerConditions | null;
  /** `outcome.error_code`: JSONPath to the destination's error code in its answer, or `null`. */
  readonly errorCode: CompiledPath | null;
  /**
   * `outcome.accepted`: exact statuses that mean the destination accepted the work and has not
   * done it (202): the operation is `accepted`, its key stays reserved until evidence settles it.
   */
  readonly accepted: readonly number[];
  /** `outcome.accepted_ref`: JSONPath to the accepted work's reference; `null`: the `Location` header. */
  readonly acceptedRef: CompiledPath | null;
  /**
   * Classifies a response status by the tool's contract: exact codes win over classes, then
   * succeeded, failed, unknown in that order; a status the contract does not name is `unknown`
   * (the gate never guesses success from a verb or a status it was not told about).
   */
  classify(status: number): OutcomeClass;
}

export interface DedupeConfig {
  readonly key: readonly CompiledPath[];
  /** Window in milliseconds; `null` means permanent. */
  readonly windowMs: number | null;
  readonly pendingTtlMs: number;
  readonly waitMs: number;
  readonly onMissing: 'block' | 'allow';
  /**
   * A reservation whose outcome was never recorded within `pendingTtlMs` (docs/design.md §4.1): `unknown`
   * (default) makes its attempt `sent_no_response` and the next proposal a retry under the unknown
   * rules; `retry` lets the next proposal go out again, accepting a possible second effect
   * (recorded as `retry_decision: curator_accepted_risk`).
   */
  readonly onExpired: 'unknown' | 'retry';
  /**
   * How key values compare. `conflate` (default): a scalar is keyed by its text, so `100`,
   * `"100"`, `100.0`, `1e2` and a form field `100` (and `true`/`"true"`) are one value, as a
   * destination that casts its parameters (Rails, Django REST framework, Express with both body
   * parsers) reads them. `exact`: JSON types count (`100` and `"100"` are two keys), for a
   * destination that is known to tell them apart.
   */
  readonly scalars: 'conflate' | 'exact';
}

export interface IdempotencyConfig {
  /** Header that carries the key (`header`, default `Idempotency-Key`); `null` when it goes in the body. */
  readonly header: string | null;
  /** Body member that carries the key (`body: $.dedup_key`), spliced into the JSON bytes. */
  readonly body: {
    /** As written, over the body (`$.dedup_key`). */
    readonly path: string;
    /** The member names from the root down. */
    readonly members: readonly string[];
    /** The same member over the argument document (`$.body.dedup_key`), left out of the fingerprint. */
    readonly argumentPath: CompiledPath;
  } | null;
  /**
   * `token` (default): the key as it is, as Stripe and most APIs read `Idempotency-Key`;
   * `sf-string`: a quoted Structured Field string (RFC 8941), as draft-ietf-httpapi-idempotency-key-header writes it.
   */
  readonly format: 'token' | 'sf-string';
  /** The longest key the destination takes; a longer operation id is sent as a SHA-256 prefix. */
  readonly maxLength: number | null;
  /** How long the destination keeps a key; past it an unknown operation is never retried at once. */
  readonly retentionMs: number | null;
  /** What the gate does with a key the agent sent itself. */
  readonly agentKey: 'keep' | 'replace' | 'require';
  readonly honored: boolean;
}

export interface ResponseConfig {
  /** JSONPath into the JSON response body giving the destination's own reference. */
  readonly ref: CompiledPath | null;
  /** Response header whose presence (and truthy value) says the destination replayed a stored result. */
  readonly replayedHeader: string | null;
}

export interface ReconcileConfig {
  readonly method: string;
  /** Path template with `{name}` placeholders filled from the request's path params; may carry a query. */
  readonly path: string;
  readonly items: CompiledPath;
  /** Remote item field path → request argument path. */
  readonly match: readonly { readonly remote: CompiledPath; readonly argument: CompiledPath }[];
}

export interface Tool {
  readonly id: string;
  readonly source: SourceLocation;
  readonly match: ToolMatcher;
  readonly effect: Effect;
  /** `null` keeps duplicate recognition off for this tool. */
  readonly dedupe: DedupeConfig | null;
  /** `null` injects nothing. */
  readonly idempotency: IdempotencyConfig | null;
  readonly retry: { readonly budget: number };
  readonly outcome: OutcomeContract;
  readonly response: ResponseConfig;
  /** Argument paths (over `{path, query, body}`) whose values never reach the store. */
  readonly redact: readonly CompiledPath[];
  /** Volatile argument paths left out of the request fingerprint. */
  readonly fingerprintIgnore: readonly CompiledPath[];
  readonly reconcile: ReconcileConfig | null;
  readonly verdict: { readonly protocol: VerdictProtocol };
  /** `enforce` unless the policy says `mode: shadow`. */
  readonly mode: ToolMode;
}

/** Everything loaded from one policies folder (or file). Frozen. */
export interface PolicySet {
  readonly default: DefaultAction;
  readonly loopBreaker: { readonly maxDuplicateSkips: number };
  /** Destination addresses never connected to; default `deny: [link_local, gate]`, `allow: []`. */
  readonly egress: EgressPolicy;
  readonly tools: readonly Tool[];
  /** Files that were loaded, in load order. */
  readonly files: readonly string[];
}

/** A tool whose route matched a request head, with its path captures. */
export interface Classification {
  readonly tool: Tool;
  readonly params: Readonly<Record<string, string>>;
}

/** Address classes `egress.deny` may name (docs/design.md §4.1). */
export type EgressClass = 'link_local' | 'loopback' | 'private' | 'gate';

/** One destination the gate is about to connect to: the name asked for, and one address it resolved to. */
export interface EgressDestination {
  /** Canonical host name asked for (`canonicalHost`), or the IP literal itself. */
  readonly host: string;
  /** The address about to be connected to (an IP literal). */
  readonly address: string;
  readonly port: number;
}

/**
 * The compiled `egress` block: which resolved addresses are never connected to. Checked on the
 * address the socket connects to, after name resolution, for every request and tunnel.
 */
export interface EgressPolicy {
  /** As written (classes and CIDRs), for logs and `policies` output. */
  readonly deny: readonly string[];
  /** As written (CIDRs and host names). */
  readonly allow: readonly string[];
  /**
   * Why `destination` is refused, or `null` when it may be connected. `isGateListener` says
   * whether an address and port reach one of the gate's own listeners (the `gate` class).
   */
  refusal(
    destination: EgressDestination,
    isGateListener: (address: string, port: number) => boolean,
  ): string | null;
}
