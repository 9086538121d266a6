import type { OutcomeClass, Tool } from '../policy/index.js';
import { BODY_LIMITS, scanJson } from './json-scan.js';

const decoder = new TextDecoder('utf-8', { fatal: true });

/** What a destination's answer settled for an attempt, and which rule said so. */
export interface AnswerOutcome {
  /** `accepted`: a status in `outcome.accepted` (202): taken, not done. */
  readonly state: OutcomeClass | 'accepted';
  /** What decided, for the trail: `status 201`, `failed_if $.ok == false`, `unreadable answer (not JSON)`. */
  readonly rule: string;
  /** The destination's error code (`outcome.error_code`), only when the state is not succeeded. */
  readonly errorCode: string | null;
}

/** A JSON answer, or why it cannot be read as one (then no condition can be trusted to hold or not). */
export type AnswerJson =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly why: string };

/** An error code is an identifier, never text: a message may echo what the agent sent. */
const ERROR_CODE = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * Reads an answer body as JSON the way the gate reads a request body (`json-scan.ts`): a body past
 * the shape limits is not parsed, and one with a repeated member name is not trusted, because
 * JSON parsers disagree on which of the two values counts (`{"ok":true,"ok":false}`).
 */
export function readAnswerJson(body: Uint8Array | string): AnswerJson {
  let text: string;
  try {
    text = typeof body === 'string' ? body : decoder.decode(body);
  } catch {
    return { ok: false, why: 'not UTF-8' };
  }
  const scan = scanJson(text, BODY_LIMITS, '$');
  if (scan.kind === 'too_deep' || scan.kind === 'too_many_nodes')
    return { ok: false, why: 'too large to read' };
  if (scan.kind === 'duplicate_member') return { ok: false, why: `duplicate member ${scan.path}` };
  if (scan.kind === 'not_json') return { ok: false, why: 'not JSON' };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, why: 'not JSON' };
  }
}

/** Whether a tool reads anything in its answers besides the status. */
export function readsAnswer(tool: Tool): boolean {
  const o = tool.outcome;
  return o.failedIf !== null || o.unknownIf !== null || o.errorCode !== null;
}

/**
 * The outcome of a plain HTTP tool's response: its status by the tool's contract, then, only when
 * the status says succeeded, the answer's conditions: `unknown_if` first (a doubt outweighs a
 * failure), then `failed_if`; any one condition decides. With conditions declared, an answer that
 * cannot be read as JSON is `unknown`, never `succeeded`: the gate was told success is not the
 * status alone, and it cannot see the rest.
 */
export function answerOutcome(tool: Tool, status: number, body: Uint8Array): AnswerOutcome {
  // Accepted, not done: neither a success to confirm nor a failure to release (migration 0015).
  if (tool.outcome.accepted.includes(status))
    return { state: 'accepted', rule: `accepted ${status}`, errorCode: null };
  const byStatus = tool.outcome.classify(status);
  if (!readsAnswer(tool)) return { state: byStatus, rule: `status ${status}`, errorCode: null };
  let answer: AnswerJson | null = null;
  const read = (): AnswerJson => {
    answer ??= readAnswerJson(body);
    return answer;
  };
  return settleByAnswer(tool, byStatus, `status ${status}`, read);
}

/**
 * Applies the tool's answer conditions to a state another reading already gave (`byRule` says
 * which), and reads its error code. `read` gives the answer document, lazily: a tool with neither
 * condition nor error code never parses a body.
 */
export function settleByAnswer(
  tool: Tool,
  state: OutcomeClass,
  byRule: string,
  read: () => AnswerJson,
): AnswerOutcome & { readonly state: OutcomeClass } {
  const { failedIf, unknownIf } = tool.outcome;
  let decided: { state: OutcomeClass; rule: string } = { state, rule: byRule };
  if (state === 'succeeded' && (failedIf !== null || unknownIf !== null)) {
    const answer = read();
    if (!answer.ok) {
      decided = { state: 'unknown', rule: `unreadable answer (${answer.why})` };
    } else {
      const unknown = unknownIf?.match(answer.value) ?? null;
      const failed = unknown === null ? (failedIf?.match(answer.value) ?? null) : null;
      if (unknown !== null) decided = { state: 'unknown', rule: `unknown_if ${unknown}` };
      else if (failed !== null) decided = { state: 'failed', rule: `failed_if ${failed}` };
    }
  }
  return { ...decided, errorCode: decided.state === 'succeeded' ? null : errorCodeOf(tool, read) };
}

/**
 * The reference of work a destination accepted: the tool's `outcome.accepted_ref` in the JSON
 * answer, else the `Location` header (RFC 9110 §15.3.3: where the status of the work can be
 * monitored), at most 2048 characters; `null` when there is none.
 */
export function acceptedRefOf(
  tool: Tool,
  headers: Readonly<Record<string, string | string[]>>,
  body: Uint8Array,
): string | null {
  let found: unknown;
  if (tool.outcome.acceptedRef !== null) {
    const answer = readAnswerJson(body);
    found = answer.ok ? tool.outcome.acceptedRef.evaluate(answer.value)[0] : undefined;
  } else {
    const location = headers['location'];
    found = Array.isArray(location) ? location[0] : location;
  }
  if (found === undefined || found === null || found === '') return null;
  const text = typeof found === 'string' ? found : JSON.stringify(found);
  return text.length > 2048 ? text.slice(0, 2048) : text;
}

/** `outcome.error_code` read from the answer: a short identifier-like scalar, else nothing. */
function errorCodeOf(tool: Tool, read: () => AnswerJson): string | null {
  const path = tool.outcome.errorCode;
  if (path === null) return null;
  const answer = read();
  if (!answer.ok) return null;
  const found = path.evaluate(answer.value)[0];
  const text =
    typeof found === 'string'
      ? found
      : typeof found === 'number' && Number.isFinite(found)
        ? String(found)
        : null;
  return text !== null && ERROR_CODE.test(text) ? text : null;
}

/**
 * The outcome a status alone decides (the tool's contract does not call it `succeeded`), as the
 * body readers (JSON-RPC, GraphQL) record it: nothing is read from the answer.
 */
export function statusOutcome<S extends string>(
  state: S,
  status: number,
): {
  readonly operationState: S;
  readonly destinationRef: null;
  readonly note: null;
  readonly rule: string;
  readonly errorCode: null;
} {
  return {
    operationState: state,
    destinationRef: null,
    note: null,
    rule: `status ${status}`,
    errorCode: null,
  };
}
