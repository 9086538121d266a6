/**
 * Validation of what an operator hands the admin API or the inspection commands: filters, limits,
 * times and approval decisions. One set of rules for both doors; each door turns `InputError`
 * into its own refusal (400 problem+json, or `EG_ERR_CONFIG_INVALID` naming the flag).
 */
import { parseDuration } from '../policy/index.js';
import {
  APPROVAL_STATES,
  type ApprovalDecisionInput,
  type ApprovalState,
  OPERATION_STATES,
  type OperationFilter,
  type OperationState,
  type Scope,
} from '../store/index.js';

/** A value an operator gave is not acceptable; the message names it and says what is. */
export class InputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InputError';
  }
}

export { APPROVAL_STATES, OPERATION_STATES } from '../store/index.js';

export const DEFAULT_LIST_LIMIT = 100;
export const MAX_LIST_LIMIT = 1000;
/** How long an approved retry may wait to start when the approver names no `ttl`. */
export const DEFAULT_APPROVAL_TTL = '1h';
export const MAX_BY_CHARS = 200;
export const MAX_REASON_CHARS = 2000;
/** Ids, tool ids and tenants are short printable text; anything else cannot name a record. */
const MAX_NAME_CHARS = 256;

// C0 controls and DEL: never part of an id or a name, and never printed back to a terminal.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
export const CONTROL = /[\u0000-\u001f\u007f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL_BUT_TAB_NEWLINE = /[\u0000-\u0008\u000b-\u001f\u007f]/;
/**
 * A lone UTF-16 surrogate (JSON's `"\ud800"` parses to one): not text, and PostgreSQL's jsonb
 * refuses it, so it is refused here as bad input instead of failing in the store as an outage.
 */
export const LONE_SURROGATE = /\p{Cs}/u;

export function parseOperationState(name: string, value: string): OperationState {
  const state = OPERATION_STATES.find((s) => s === value);
  if (state === undefined) {
    throw new InputError(`${name} must be one of ${OPERATION_STATES.join(', ')}; got ${quote(value)}`);
  }
  return state;
}

export function parseApprovalState(name: string, value: string): ApprovalState {
  const state = APPROVAL_STATES.find((s) => s === value);
  if (state === undefined) {
    throw new InputError(`${name} must be one of ${APPROVAL_STATES.join(', ')}; got ${quote(value)}`);
  }
  return state;
}

/** An integer from 1 to 1000, written in plain digits. */
export function parseLimit(name: string, value: string): number {
  const n = /^\d{1,7}$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= 1 && n <= MAX_LIST_LIMIT)) {
    throw new InputError(`${name} must be an integer from 1 to ${MAX_LIST_LIMIT}; got ${quote(value)}`);
  }
  return n;
}

/**
 * `since`: a duration back from `now` (`90s`, `15m`, `24h`, `7d`) or an ISO 8601 date or time
 * (`2025-06-01`, `2025-06-01T12:00:00Z`). Returns the ISO 8601 instant.
 */
export function parseSince(name: string, value: string, now: Date = new Date()): string {
  if (/^\d+(ms|s|m|h|d)$/.test(value)) {
    let ms: number | null;
    try {
      ms = parseDuration(value);
    } catch (err) {
      throw new InputError(`${name}: ${(err as Error).message}`);
    }
    const at = now.getTime() - (ms ?? 0);
    if (!Number.isFinite(at) || at < -8.64e15)
      throw new InputError(`${name} ${quote(value)} is too far back`);
    return new Date(at).toISOString();
  }
  // A date alone is midnight UTC; a time needs its zone (Z or an offset), never the host's.
  const iso = /^(\d{4})-(\d{2})-(\d{2})(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/.exec(
    value,
  );
  if (iso !== null && isCalendarDate(Number(iso[1]), Number(iso[2]), Number(iso[3]))) {
    const at = Date.parse(value);
    if (!Number.isNaN(at)) return new Date(at).toISOString();
  }
  throw new InputError(
    `${name} must be a duration back from now (90s, 15m, 24h, 7d), an ISO 8601 date (2025-06-01) or time with its zone (2025-06-01T12:00:00Z); got ${quote(value)}`,
  );
}

function isCalendarDate(year: number, month: number, day: number): boolean {
  if (month < 1 || month > 12 || day < 1) return false;
  return day <= new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/** An id, tool id or tenant: 1..256 characters, no control characters. */
export function parseName(name: string, value: string): string {
  if (
    value.length === 0 ||
    value.length > MAX_NAME_CHARS ||
    CONTROL.test(value) ||
    LONE_SURROGATE.test(value)
  ) {
    throw new InputError(
      `${name} must be 1 to ${MAX_NAME_CHARS} characters without control characters; got ${quote(truncate(value, 60))}`,
    );
  }
  return value;
}

/**
 * A scope named by `tenant`, `area` and `agent` together, or `null` when none is given (the store
 * then takes the one the run's own records name). One of them alone is refused: half a scope is a
 * typo, not a choice.
 */
export function parseOptionalScope(
  raw: { readonly tenant?: unknown; readonly area?: unknown; readonly agent?: unknown },
  names: (field: string) => string = (field) => field,
): Scope | null {
  const fields = ['tenant', 'area', 'agent'] as const;
  const given = fields.filter((f) => raw[f] !== undefined);
  if (given.length === 0) return null;
  if (given.length !== 3) {
    throw new InputError(
      `${names('tenant')}, ${names('area')} and ${names('agent')} name the scope together: give all three or none (none = the run's own)`,
    );
  }
  const [tenant, area, agent] = fields.map((f) => {
    const v = raw[f];
    if (typeof v !== 'string') throw new InputError(`${names(f)} must be text`);
    return parseName(names(f), v);
  });
  return { tenant: tenant!, area: area!, agent: agent! };
}

/** The operation filter from `state`, `tool`, `tenant`, `since`, `limit` (each optional). */
export function parseOperationFilter(
  raw: {
    readonly state?: string | undefined;
    readonly tool?: string | undefined;
    readonly tenant?: string | undefined;
    readonly since?: string | undefined;
    readonly limit?: string | undefined;
  },
  names: (field: string) => string = (field) => field,
  now: Date = new Date(),
): OperationFilter & { readonly limit: number } {
  return {
    ...(raw.state === undefined ? {} : { state: parseOperationState(names('state'), raw.state) }),
    ...(raw.tool === undefined ? {} : { toolId: parseName(names('tool'), raw.tool) }),
    ...(raw.tenant === undefined ? {} : { tenant: parseName(names('tenant'), raw.tenant) }),
    ...(raw.since === undefined ? {} : { since: parseSince(names('since'), raw.since, now) }),
    limit: raw.limit === undefined ? DEFAULT_LIST_LIMIT : parseLimit(names('limit'), raw.limit),
  };
}

/**
 * How long an approved retry may wait to start: absent → 1 hour (`DEFAULT_APPROVAL_TTL`);
 * `permanent` → no expiry (`null`); else a positive duration (`30m`, `4h`, `2d`).
 */
export function parseApprovalTtl(name: string, value: string | undefined): number | null {
  let ms: number | null;
  try {
    ms = parseDuration(value ?? DEFAULT_APPROVAL_TTL);
  } catch (err) {
    throw new InputError(`${name}: ${(err as Error).message}`);
  }
  if (ms === 0) throw new InputError(`${name} must be longer than 0; got ${quote(value ?? '')}`);
  return ms;
}

/** A positive duration (e.g. `--stale-after 30s`); `permanent` and `0` are refused. */
export function parsePositiveDuration(name: string, value: string): number {
  let ms: number | null;
  try {
    ms = parseDuration(value);
  } catch (err) {
    throw new InputError(`${name}: ${(err as Error).message}`);
  }
  if (ms === null || ms === 0) {
    throw new InputError(`${name} must be a positive duration (500ms, 30s, 5m); got ${quote(value)}`);
  }
  return ms;
}

/** `by`: who decided, 1..200 characters, no control characters; surrounding blanks dropped. */
export function parseDecidedBy(name: string, value: unknown): string {
  const text = typeof value === 'string' ? value.trim() : '';
  const chars = [...text].length;
  if (chars === 0 || chars > MAX_BY_CHARS || CONTROL.test(text) || LONE_SURROGATE.test(text)) {
    throw new InputError(
      `${name} must name who decides: 1 to ${MAX_BY_CHARS} characters without control characters (e.g. a login or an email)`,
    );
  }
  return text;
}

/** `reason`: why, 1..2000 characters; tabs and newlines allowed, other control characters not. */
export function parseDecisionReason(name: string, value: unknown): string {
  const text = typeof value === 'string' ? value.trim() : '';
  const chars = [...text].length;
  if (
    chars === 0 ||
    chars > MAX_REASON_CHARS ||
    CONTROL_BUT_TAB_NEWLINE.test(text) ||
    LONE_SURROGATE.test(text)
  ) {
    throw new InputError(
      `${name} must say why: 1 to ${MAX_REASON_CHARS} characters without control characters other than tab and newline`,
    );
  }
  return text;
}

export type ApprovalAction = ApprovalDecisionInput['action'];

/** The decisions an operator takes on an approval card, as the API and the pages spell them. */
export const APPROVAL_ACTIONS: readonly ApprovalAction[] = Object.freeze(['approve', 'deny', 'revoke']);

export function isApprovalAction(value: string): value is ApprovalAction {
  return (APPROVAL_ACTIONS as readonly string[]).includes(value);
}

/**
 * An approve/deny/revoke decision from its raw parts (a JSON body's members, or flags). `ttl` is
 * only for `approve`; giving it to another action is refused rather than ignored.
 */
export function parseApprovalDecision(
  approvalId: string,
  action: ApprovalAction,
  raw: { readonly by: unknown; readonly reason: unknown; readonly ttl?: unknown },
  names: (field: string) => string = (field) => field,
): ApprovalDecisionInput {
  const by = parseDecidedBy(names('by'), raw.by);
  const reason = parseDecisionReason(names('reason'), raw.reason);
  if (action !== 'approve') {
    if (raw.ttl !== undefined)
      throw new InputError(`${names('ttl')} applies only to approve, not to ${action}`);
    return { approvalId, action, by, reason };
  }
  if (raw.ttl !== undefined && typeof raw.ttl !== 'string') {
    throw new InputError(`${names('ttl')} must be a duration string such as "1h", or "permanent"`);
  }
  return { approvalId, action, by, reason, ttlMs: parseApprovalTtl(names('ttl'), raw.ttl) };
}

function quote(value: string): string {
  return JSON.stringify(value);
}

function truncate(value: string, max: number): string {
  return value.length <= max ? value : `${value.slice(0, max)}…`;
}
