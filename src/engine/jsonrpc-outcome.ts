import type { OutcomeClass, Tool } from '../policy/index.js';
import { readAnswerJson, settleByAnswer, statusOutcome } from './answer-outcome.js';
import { destinationRefOf } from './response-facts.js';
import { isEventStream, SseReader } from './sse-reader.js';

const decoder = new TextDecoder();

/**
 * What a JSON-RPC tool's response says about its effect (docs/design.md §4.1 "MCP and other
 * JSON-RPC tools").
 */
export interface JsonRpcOutcome {
  /** `open`: MCP `input_required`, the tool did not run and the call's continuation is the same operation. */
  /** `accepted`: an MCP task result (the call runs on as a task, `task.taskId`), migration 0015. */
  readonly operationState: OutcomeClass | 'open' | 'accepted';
  readonly destinationRef: string | null;
  /** Why the state is not the HTTP status's, for the attempt's `error` (null when the call succeeded). */
  readonly note: string | null;
  /** Which rule decided, for the trail: `status 503`, `jsonrpc error`, `mcp isError`, `failed_if …`. */
  readonly rule: string;
  /** The destination's error code (`outcome.error_code` over the JSON-RPC response), or null. */
  readonly errorCode: string | null;
}

/**
 * The outcome of a JSON-RPC call, read from the JSON-RPC response that answers the request, not
 * only from the HTTP status: an HTTP 200 can carry a JSON-RPC `error` (the call failed: the key is
 * released so the agent may try again) or an MCP tool execution error (`result.isError: true`,
 * `outcome.tool_error`, default failed). A status the contract does not call `succeeded` keeps its
 * class. A 2xx without a response for this request (another id, no JSON-RPC response at all, an
 * SSE stream that ended before it) is `unknown`: the call may have run.
 *
 * MCP's multi-round-trip `resultType: "input_required"` (2026-07-28) is not an outcome either: the
 * tool did not run, it asks for input, and the client sends the same call again with
 * `inputResponses`. It is `open`: the operation stays open and its key awaits that continuation,
 * which the store makes the next attempt of the same operation (eg_continue.sql). Only the explicit
 * `resultType` counts: reading a finished call as incomplete would let its repeat run again.
 */
export function jsonRpcOutcome(
  tool: Tool,
  rpcId: string | number | null,
  status: number,
  contentType: string | undefined,
  body: Uint8Array,
): JsonRpcOutcome {
  const byStatus = tool.outcome.classify(status);
  if (byStatus !== 'succeeded') return statusOutcome(byStatus, status);
  const found = findResponse(rpcId, contentType, body);
  if (found === null) {
    return {
      operationState: 'unknown',
      destinationRef: null,
      note: `HTTP ${status} without the JSON-RPC response to id ${JSON.stringify(rpcId)}: the call may have run`,
      rule: 'no jsonrpc response',
      errorCode: null,
    };
  }
  return jsonRpcResponseOutcome(tool, found.response, found.raw);
}

/**
 * What one JSON-RPC response (to this request) says: error, tool error, input_required or a result;
 * then the tool's answer conditions (`failed_if`, `unknown_if`) over that response object, as for
 * a plain HTTP answer over its body. `raw` is the text it was parsed from (the JSON body, or the SSE
 * event's data), checked for repeated member names before a condition is trusted.
 */
export function jsonRpcResponseOutcome(tool: Tool, response: JsonRpcResponse, raw?: string): JsonRpcOutcome {
  const read = () => (raw === undefined ? { ok: true as const, value: response } : readAnswerJson(raw));
  if ('error' in response) {
    // The code only: the message is the destination's text and may echo what the agent sent.
    const code = (response.error as { code?: unknown } | null)?.code;
    const note = `JSON-RPC error ${Number.isSafeInteger(code) ? String(code) : '(no integer code)'}`;
    const settled = settleByAnswer(tool, 'failed', 'jsonrpc error', read);
    return {
      operationState: 'failed',
      destinationRef: null,
      note,
      rule: settled.rule,
      errorCode: settled.errorCode,
    };
  }
  const result = response.result as Record<string, unknown> | null;
  if (result !== null && typeof result === 'object' && result['resultType'] === 'input_required') {
    return {
      operationState: 'open',
      destinationRef: null,
      note: 'MCP input_required: the tool asked for input; the call continues as the same operation',
      rule: 'mcp input_required',
      errorCode: null,
    };
  }
  // MCP Tasks: a tools/call answered with a task that is still working was accepted, not done; the
  // task id is the reference its settlement names (tasks/get is a read, never a proposal).
  const task = result !== null && typeof result === 'object' ? result['task'] : undefined;
  if (task !== null && typeof task === 'object' && !Array.isArray(task)) {
    const { taskId, status } = task as Record<string, unknown>;
    if (typeof taskId === 'string' && taskId !== '' && status === 'working') {
      return {
        operationState: 'accepted',
        destinationRef: taskId.slice(0, 2048),
        note: 'MCP task working: the call runs on as a task',
        rule: 'mcp task working',
        errorCode: null,
      };
    }
  }
  const ref = destinationRefOf(tool, result);
  const isError = result !== null && typeof result === 'object' && result['isError'] === true;
  const byRpc = isError ? tool.outcome.toolError : 'succeeded';
  // Conditions read the response object ($.result…), whatever the transport around it.
  const settled = settleByAnswer(tool, byRpc, isError ? 'mcp isError' : 'jsonrpc result', () => {
    const answer = read();
    return answer.ok ? { ok: true, value: response } : answer;
  });
  const note = isError
    ? 'MCP tool error (result.isError)'
    : settled.state === 'succeeded'
      ? null
      : `the answer says ${settled.rule}`;
  return {
    operationState: settled.state,
    destinationRef: ref,
    note,
    rule: settled.rule,
    errorCode: settled.errorCode,
  };
}

export type JsonRpcResponse = { readonly id: unknown } & (
  | { readonly result: unknown }
  | { readonly error: unknown }
);

/**
 * The JSON-RPC response to `rpcId` in a JSON body (one object, or a batch) or an SSE stream, with
 * the text it was parsed from, or null.
 */
function findResponse(
  rpcId: string | number | null,
  contentType: string | undefined,
  body: Uint8Array,
): { readonly response: JsonRpcResponse; readonly raw: string } | null {
  const text = decoder.decode(body);
  const texts = isEventStream(contentType) ? new SseReader(body.byteLength).feed(text) : [text];
  for (const raw of texts) {
    const c = parseJson(raw);
    for (const item of Array.isArray(c) ? c : [c]) {
      if (isResponseTo(item, rpcId)) return { response: item, raw };
    }
  }
  return null;
}

/** Whether `item` is the JSON-RPC response to `rpcId` (same value and type, JSON-RPC 2.0 §5). */
export function isResponseTo(item: unknown, rpcId: string | number | null): item is JsonRpcResponse {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) return false;
  const o = item as Record<string, unknown>;
  if (!('result' in o) && !('error' in o)) return false;
  // The id must be the request's, by value and type: `1` does not answer `"1"` (JSON-RPC 2.0 §5).
  return o['id'] === rpcId;
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
