import type { OutcomeClass, Tool } from '../policy/index.js';
import { destinationRefOf } from './response-facts.js';
import { SseReader } from './sse-reader.js';

const decoder = new TextDecoder();

/** What a JSON-RPC tool's response says about its effect (DESIGN.md §4.1 "MCP and other JSON-RPC tools"). */
export interface JsonRpcOutcome {
  readonly operationState: OutcomeClass;
  readonly destinationRef: string | null;
  /** Why the state is not the HTTP status's, for the attempt's `error` (null when the call succeeded). */
  readonly note: string | null;
}

/**
 * The outcome of a JSON-RPC call, read from the JSON-RPC response that answers the request, not
 * only from the HTTP status: an HTTP 200 can carry a JSON-RPC `error` (the call failed: the key is
 * released so the agent may try again) or an MCP tool execution error (`result.isError: true`,
 * `outcome.tool_error`, default failed). A status the contract does not call `succeeded` keeps its
 * class. A 2xx without a response for this request (another id, no JSON-RPC response at all, an
 * SSE stream that ended before it) is `unknown`: the call may have run.
 *
 * MCP's multi-round-trip `resultType: "input_required"` is not an outcome either; until the gate
 * carries the continuation as the same operation it is kept `unknown`, which never confirms the key
 * (a held continuation rather than a second effect).
 */
export function jsonRpcOutcome(
  tool: Tool,
  rpcId: string | number | null,
  status: number,
  contentType: string | undefined,
  body: Uint8Array,
): JsonRpcOutcome {
  const byStatus = tool.outcome.classify(status);
  if (byStatus !== 'succeeded') return { operationState: byStatus, destinationRef: null, note: null };
  const response = findResponse(rpcId, contentType, body);
  if (response === null) {
    return {
      operationState: 'unknown',
      destinationRef: null,
      note: `HTTP ${status} without the JSON-RPC response to id ${JSON.stringify(rpcId)}: the call may have run`,
    };
  }
  return jsonRpcResponseOutcome(tool, response);
}

/** What one JSON-RPC response (to this request) says: error, tool error, input_required or a result. */
export function jsonRpcResponseOutcome(tool: Tool, response: JsonRpcResponse): JsonRpcOutcome {
  if ('error' in response) {
    // The code only: the message is the destination's text and may echo what the agent sent.
    const code = (response.error as { code?: unknown } | null)?.code;
    const note = `JSON-RPC error ${Number.isSafeInteger(code) ? String(code) : '(no integer code)'}`;
    return { operationState: 'failed', destinationRef: null, note };
  }
  const result = response.result as Record<string, unknown> | null;
  if (result !== null && typeof result === 'object' && result['resultType'] === 'input_required') {
    return {
      operationState: 'unknown',
      destinationRef: null,
      note: 'MCP input_required: the tool asked for more input; its continuation is not carried as the same operation yet',
    };
  }
  const ref = destinationRefOf(tool, result);
  if (result !== null && typeof result === 'object' && result['isError'] === true) {
    return {
      operationState: tool.outcome.toolError,
      destinationRef: ref,
      note: 'MCP tool error (result.isError)',
    };
  }
  return { operationState: 'succeeded', destinationRef: ref, note: null };
}

export type JsonRpcResponse = { readonly id: unknown } & (
  | { readonly result: unknown }
  | { readonly error: unknown }
);

/** The JSON-RPC response to `rpcId` in a JSON body (one object, or a batch) or an SSE stream, or null. */
function findResponse(
  rpcId: string | number | null,
  contentType: string | undefined,
  body: Uint8Array,
): JsonRpcResponse | null {
  const text = decoder.decode(body);
  const candidates: unknown[] = [];
  if (contentType?.toLowerCase().startsWith('text/event-stream') === true) {
    for (const data of new SseReader(body.byteLength).feed(text)) candidates.push(parseJson(data));
  } else {
    candidates.push(parseJson(text));
  }
  for (const c of candidates) {
    for (const item of Array.isArray(c) ? c : [c]) {
      if (isResponseTo(item, rpcId)) return item;
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
