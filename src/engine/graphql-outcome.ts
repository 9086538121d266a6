import type { OutcomeClass, Tool } from '../policy/index.js';
import { type AnswerJson, readAnswerJson, settleByAnswer, statusOutcome } from './answer-outcome.js';
import { destinationRefOf } from './response-facts.js';

/** What a GraphQL tool's answer says about its mutation (docs/design.md §4.1 "GraphQL tools"). */
export interface GraphqlOutcome {
  readonly operationState: OutcomeClass;
  readonly destinationRef: string | null;
  /** Why, for the attempt's `error`: the GraphQL error code, or what made the answer unreadable. */
  readonly note: string | null;
  /** Which rule decided, for the trail: `status 503`, `graphql data.issueCreate`, `graphql errors`. */
  readonly rule: string;
  /** `outcome.error_code` when the tool declares one, else the GraphQL error's `extensions.code`. */
  readonly errorCode: string | null;
}

/** The mutation field a request performed and the name its answer comes under in `data`. */
export interface GraphqlCall {
  readonly field: string;
  readonly responseName: string;
}

/** An error code is an identifier, never text: a message may echo what the agent sent. */
const ERROR_CODE = /^[A-Za-z0-9_.:-]{1,64}$/;

/**
 * The outcome of a GraphQL mutation, read from the answer's `data` and `errors`, not only from the
 * HTTP status: GraphQL servers answer `200` for a mutation that did nothing, with the reason in
 * `errors` (GraphQL spec §7.1). A status the tool's contract does not call `succeeded` keeps its
 * class. Within it: the field's `data.<responseName>` non-null, the mutation ran and returned
 * (`succeeded`, whatever errors its sub-selections had, unless the tool's own `failed_if` or
 * `unknown_if` says otherwise); `errors` with the field null or absent, it failed (the key is
 * released, so the corrected call may go out); anything else (not JSON, a repeated member, no
 * `data` and no `errors`, a null field without an error) is `unknown`: it may have run.
 */
export function graphqlOutcome(
  tool: Tool,
  call: GraphqlCall,
  status: number,
  body: Uint8Array,
): GraphqlOutcome {
  const byStatus = tool.outcome.classify(status);
  if (byStatus !== 'succeeded') return statusOutcome(byStatus, status);
  const answer = readAnswerJson(body);
  const object = answer.ok && isObject(answer.value) ? answer.value : null;
  if (object === null) {
    const why = answer.ok ? 'not a JSON object' : answer.why;
    return unknown(
      `unreadable answer (${why})`,
      `HTTP ${status} without a readable GraphQL response (${why}): the mutation may have run`,
    );
  }
  const read = (): AnswerJson => answer;
  const data = object['data'];
  const value = isObject(data) ? data[call.responseName] : undefined;
  if (value !== null && value !== undefined) {
    const settled = settleByAnswer(tool, 'succeeded', `graphql data.${call.responseName}`, read);
    return {
      operationState: settled.state,
      destinationRef: settled.state === 'succeeded' ? destinationRefOf(tool, object) : null,
      note: settled.state === 'succeeded' ? null : `GraphQL answer: ${settled.rule}`,
      rule: settled.rule,
      errorCode: settled.errorCode,
    };
  }
  const errors = object['errors'];
  if (Array.isArray(errors) && errors.length > 0) {
    const settled = settleByAnswer(tool, 'failed', 'graphql errors', read);
    const code = settled.errorCode ?? graphqlErrorCode(errors[0]);
    return {
      operationState: 'failed',
      destinationRef: null,
      note: `GraphQL error ${code ?? '(no code)'}`,
      rule: settled.rule,
      errorCode: code,
    };
  }
  return unknown(
    `graphql data.${call.responseName} ${value === null ? 'null' : 'absent'} without errors`,
    `HTTP ${status} with data.${call.responseName} ${value === null ? 'null' : 'absent'} and no errors: the mutation may have run`,
  );
}

function unknown(rule: string, note: string): GraphqlOutcome {
  return { operationState: 'unknown', destinationRef: null, note, rule, errorCode: null };
}

/** `extensions.code` of a GraphQL error (`BAD_USER_INPUT`, `INVALID_INPUT`) when it is an identifier. */
function graphqlErrorCode(error: unknown): string | null {
  const extensions = isObject(error) ? error['extensions'] : undefined;
  const code = isObject(extensions) ? extensions['code'] : undefined;
  const text =
    typeof code === 'string' ? code : typeof code === 'number' && Number.isFinite(code) ? String(code) : null;
  return text !== null && ERROR_CODE.test(text) ? text : null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
