/**
 * Typed errors with stable codes. Every code is documented in `docs/errors.md` with how to fix
 * it; `test/unit/errors.test.ts` keeps the catalogue and the docs in agreement.
 */

/** How one error code is answered over HTTP, and what it means. */
export interface ErrorAnswer {
  readonly status: number;
  /** Slug of the problem's `type`: `urn:effectgate:problem:<type>`. */
  readonly type: string;
}

interface ErrorEntry extends ErrorAnswer {
  readonly summary: string;
  readonly variants?: Readonly<Record<string, ErrorAnswer>>;
}

/**
 * The stable error codes, each with how it is answered over HTTP: the status and the
 * `urn:effectgate:problem:<type>` of the problem+json the gate or the admin API sends for it (a
 * code only commands raise still has one, for the day an API meets it). `variants` are the other
 * answers one code has (a timeout's 504). Never rename a code: users grep logs and scripts for
 * them.
 */
export const ERROR_CODES = {
  EG_ERR_POLICY_INVALID: {
    status: 500,
    type: 'policy_invalid',
    summary: 'A tool classification file is invalid (YAML, schema, JSONPath or route).',
  },
  EG_ERR_CONFIG_INVALID: {
    status: 400,
    type: 'config_invalid',
    summary: 'A command-line flag, environment variable or option is invalid.',
  },
  EG_ERR_STORE_UNAVAILABLE: {
    status: 503,
    type: 'store_unavailable',
    summary: 'The store (PostgreSQL or PGlite) could not be reached or answered with an error.',
  },
  EG_ERR_STORE_LOCKED: {
    status: 500,
    type: 'store_locked',
    summary: 'The embedded PGlite store directory is already open in another live process.',
  },
  EG_ERR_STORE_MISSING: {
    status: 500,
    type: 'store_missing',
    summary:
      'A command found no store where it looked (no embedded store there, or a database never migrated); nothing was created.',
  },
  EG_ERR_MIGRATION_FAILED: {
    status: 500,
    type: 'migration_failed',
    summary: 'A store migration failed; its run rolled back whole, so the store keeps its previous schema.',
  },
  EG_ERR_STORE_SCHEMA_NEWER: {
    status: 500,
    type: 'store_schema_newer',
    summary:
      'The store was migrated by a newer effectgate than this one (a migration it does not know, or SQL functions a newer version wrote); it changed nothing and refuses to start.',
  },
  EG_ERR_STORE_RESTORED: {
    status: 500,
    type: 'store_restored',
    summary:
      "The store's recorded transaction ids are ahead of its database's (a dump restored into another PostgreSQL cluster): new events would never be projected nor sealed, so the gate does not start.",
  },
  EG_ERR_STORE_ANSWER_INVALID: {
    status: 500,
    type: 'store_answer_invalid',
    summary:
      "The store answered a hot-path call (eg_decide, eg_record_outcome, eg_batch) with a value that is not the contract's shape; the message names the field.",
  },
  EG_ERR_AUDIT_CHAIN_BROKEN: {
    status: 500,
    type: 'audit_chain_broken',
    summary: 'The hash-chained event log does not verify.',
  },
  EG_ERR_AUDIT_EXPORT_INVALID: {
    status: 422,
    type: 'audit_export_invalid',
    summary:
      'A file read as an audit export (`audit verify --file`, a retention archive) is not one: a line is not JSON, a field is missing or unexpected, the header is absent.',
  },
  EG_ERR_AUDIT_KEY_INVALID: {
    status: 500,
    type: 'audit_key_invalid',
    summary:
      'An audit signing or verifier key (a signed-note key: name+id+key) is malformed, has an id that does not match it, or an unknown algorithm; or a signed note or checkpoint read back is not well-formed.',
  },
  EG_ERR_BODY_TOO_LARGE: {
    status: 413,
    type: 'body_too_large',
    summary: 'A governed request body is larger than the configured limit.',
  },
  EG_ERR_BODY_TOO_COMPLEX: {
    status: 413,
    type: 'body_too_complex',
    summary: 'A governed JSON body nests too deep or holds too many nodes to read safely.',
  },
  EG_ERR_ANALYSIS_FAILED: {
    status: 503,
    type: 'analysis_failed',
    summary:
      'The worker thread analysing a large governed body failed (crashed, or past its memory limit); nothing was sent.',
  },
  EG_ERR_BODY_UNREADABLE: {
    status: 415,
    type: 'body_unreadable',
    summary:
      'A governed body the gate cannot read one way only: JSON under a label some servers do not read as JSON, an irregular multipart body, or a body it cannot read on a route whose tools are chosen by their body.',
  },
  EG_ERR_DESTINATION_REFUSED: {
    status: 403,
    type: 'destination_refused',
    summary:
      "The destination address is one the gate never connects to (0.0.0.0, ::, or one the policies' egress block denies).",
  },
  EG_ERR_CONNECT_PORT_FORBIDDEN: {
    status: 403,
    type: 'connect_port_forbidden',
    summary:
      'A CONNECT names a port that is neither in --allow-connect-ports (443 and 80 by default) nor one a tool names the host on; nothing was connected.',
  },
  EG_ERR_ARGUMENTS_AMBIGUOUS: {
    status: 422,
    type: 'arguments_ambiguous',
    // MCP routing headers that name another call than the body (MCP 2026-07-28 requires 400).
    variants: { headers_disagree: { status: 400, type: 'headers_disagree' } },
    summary:
      'A governed request gives one argument twice (a JSON member, also under Unicode case folding, or a query parameter or form field a key path reads), a key member only under folded names, MCP routing headers that disagree with its body, or a GraphQL request that may perform more than one governed mutation or another one than the gate reads.',
  },
  EG_ERR_GRAPHQL_INVALID: {
    status: 400,
    type: 'graphql_invalid',
    summary:
      'A GraphQL request on an endpoint a GraphQL tool governs whose document or parameters the gate cannot read one way: a syntax error, an operation that operationName does not choose, a fragment or variable that does not exist, variables that are not an object, a persisted query sent without its document, or a body that is not JSON.',
  },
  EG_ERR_BAD_REQUEST: {
    status: 400,
    type: 'bad_request',
    variants: { headers_too_large: { status: 431, type: 'headers_too_large' } },
    summary: 'The request cannot be proxied (not absolute-form, bad URL, bad header).',
  },
  EG_ERR_PROXY_AUTH_REQUIRED: {
    status: 407,
    type: 'proxy_auth_required',
    summary: 'A request to a proxy started with `--agents` carries no valid agent credential.',
  },
  EG_ERR_AMBIGUOUS_ROUTE: {
    status: 400,
    type: 'ambiguous_route',
    summary:
      'Servers may route the request to a tool the gate would not (a lenient reading of its path: `\\`, case, `;params`, `//`, `%2F`, a format suffix), with other key captures, or to two governed routes (method overrides that disagree).',
  },
  EG_ERR_UPSTREAM_FAILED: {
    status: 502,
    type: 'upstream_failed',
    variants: { timed_out: { status: 504, type: 'upstream_failed' } },
    summary: 'The upstream could not be reached or gave no usable response.',
  },
  EG_ERR_NOT_FOUND: {
    status: 404,
    type: 'not_found',
    summary: 'An operation, approval or run named by a command or the admin API does not exist.',
  },
  EG_ERR_APPROVAL_STATE: {
    status: 409,
    type: 'approval_state',
    summary: 'An approval cannot take this action in its current state.',
  },
  EG_ERR_OPERATION_STATE: {
    status: 409,
    type: 'operation_state',
    summary:
      'An operation cannot be resolved in its current state (only an unknown one, or an open one past its deadline).',
  },
  EG_ERR_RUN_STATE: {
    status: 409,
    type: 'run_state',
    summary: 'A run cannot be released: it is not halted (never was, or already released).',
  },
  EG_ERR_OPERATION_AMBIGUOUS: {
    status: 409,
    type: 'operation_ambiguous',
    summary:
      'An idempotency key or destination reference names more than one operation, so evidence cannot be attached to one.',
  },
  EG_ERR_IDEMPOTENCY_KEY: {
    status: 422,
    type: 'idempotency_key',
    summary:
      "A governed request's own idempotency key cannot be used as the tool's idempotency dialect asks: missing where agent_key: require, repeated, longer than 255 characters where it would be sent, or a body the key cannot be put into.",
  },
} as const satisfies Readonly<Record<string, ErrorEntry>>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The names of the other answers `code` has (`'timed_out'` of `EG_ERR_UPSTREAM_FAILED`). */
export type ErrorVariant<C extends ErrorCode> = (typeof ERROR_CODES)[C] extends {
  readonly variants: infer V;
}
  ? keyof V & string
  : never;

/** The status and problem type `code` (or one of its variants) is answered with. */
export function errorAnswer<C extends ErrorCode>(code: C, variant?: ErrorVariant<C>): ErrorAnswer {
  const entry: ErrorEntry = ERROR_CODES[code];
  const answer = variant === undefined ? entry : entry.variants?.[variant];
  if (answer === undefined) throw new RangeError(`${code} has no answer ${String(variant)}`);
  return { status: answer.status, type: answer.type };
}

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

/** A store function's answer this effectgate cannot read: `field` names what is wrong in it. */
export class StoreAnswerError extends EffectgateError {
  readonly field: string;

  constructor(fn: string, field: string, problem: string) {
    super(
      'EG_ERR_STORE_ANSWER_INVALID',
      `${fn} answered a value this effectgate cannot read: ${field} ${problem}. Its SQL functions may be another version's (effectgate migrate applies this one's).`,
    );
    this.name = 'StoreAnswerError';
    this.field = field;
  }
}

export function isEffectgateError(err: unknown): err is EffectgateError {
  return err instanceof EffectgateError;
}
