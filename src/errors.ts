/**
 * Typed errors with stable codes. Every code is documented in `docs/errors.md` with how to fix
 * it; `test/unit/errors.test.ts` keeps the catalogue and the docs in agreement.
 */

/** The stable error codes. Never rename one: users grep logs and scripts for them. */
export const ERROR_CODES = {
  EG_ERR_POLICY_INVALID: 'A tool classification file is invalid (YAML, schema, JSONPath or route).',
  EG_ERR_CONFIG_INVALID: 'A command-line flag, environment variable or option is invalid.',
  EG_ERR_STORE_UNAVAILABLE:
    'The store (PostgreSQL or PGlite) could not be reached or answered with an error.',
  EG_ERR_STORE_LOCKED: 'The embedded PGlite store directory is already open in another live process.',
  EG_ERR_STORE_MISSING:
    'A command found no store where it looked (no embedded store there, or a database never migrated); nothing was created.',
  EG_ERR_MIGRATION_FAILED: 'A store migration failed; the store was left at the last good migration.',
  EG_ERR_AUDIT_CHAIN_BROKEN: 'The hash-chained event log does not verify.',
  EG_ERR_BODY_TOO_LARGE: 'A governed request body is larger than the configured limit.',
  EG_ERR_BODY_TOO_COMPLEX: 'A governed JSON body nests too deep or holds too many nodes to read safely.',
  EG_ERR_ANALYSIS_FAILED:
    'The worker thread analysing a large governed body failed (crashed, or past its memory limit); nothing was sent.',
  EG_ERR_BODY_UNREADABLE:
    'A request to a route whose tools are chosen by its body carries a body the gate cannot read.',
  EG_ERR_DESTINATION_REFUSED:
    "The destination address is one the gate never connects to (0.0.0.0, ::, or one the policies' egress block denies).",
  EG_ERR_ARGUMENTS_AMBIGUOUS:
    'A governed request gives one argument twice (a JSON member, or a query parameter or form field a key path reads), or MCP routing headers that disagree with its body.',
  EG_ERR_BAD_REQUEST: 'The request cannot be proxied (not absolute-form, bad URL, bad header).',
  EG_ERR_AMBIGUOUS_ROUTE:
    'A request to a governed host would reach a tool only under a lenient reading of its path (`\\`, case, `;params`, `//`, `%2F`).',
  EG_ERR_UPSTREAM_FAILED: 'The upstream could not be reached or gave no usable response.',
  EG_ERR_NOT_FOUND: 'An operation, approval or run named by a command or the admin API does not exist.',
  EG_ERR_APPROVAL_STATE: 'An approval cannot take this action in its current state.',
  EG_ERR_OPERATION_STATE:
    'An operation cannot be resolved in its current state (only an unknown one, or an open one past its deadline).',
  EG_ERR_RUN_STATE: 'A run cannot be released: it is not halted (never was, or already released).',
  EG_ERR_OPERATION_AMBIGUOUS:
    'An idempotency key or destination reference names more than one operation, so evidence cannot be attached to one.',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/** Base class of every error effectgate throws on purpose. */
export class EffectgateError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EffectgateError';
    this.code = code;
  }
}

/** One problem found in a policy file, located precisely enough to fix it. */
export interface PolicyIssue {
  readonly file: string;
  readonly line: number;
  readonly column: number;
  /** Dotted path of the offending field, e.g. `tools[0].dedupe.window`. */
  readonly field: string;
  readonly message: string;
}

/** Thrown when one or more policy files are invalid; lists every issue found, not only the first. */
export class PolicyError extends EffectgateError {
  readonly issues: readonly PolicyIssue[];

  constructor(issues: readonly PolicyIssue[], options?: { cause?: unknown }) {
    super('EG_ERR_POLICY_INVALID', formatPolicyIssues(issues), options);
    this.name = 'PolicyError';
    this.issues = Object.freeze([...issues]);
  }
}

/** `file:line:column: field: message`, one issue per line, like a compiler. */
export function formatPolicyIssues(issues: readonly PolicyIssue[]): string {
  return issues.map((i) => `${i.file}:${i.line}:${i.column}: ${i.field}: ${i.message}`).join('\n');
}

export class StoreError extends EffectgateError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('EG_ERR_STORE_UNAVAILABLE', message, options);
    this.name = 'StoreError';
  }
}

export function isEffectgateError(err: unknown): err is EffectgateError {
  return err instanceof EffectgateError;
}
