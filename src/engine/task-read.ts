import { createHash } from 'node:crypto';
import type { Store } from '../store/index.js';
import { isEventStream, SseReader } from './sse-reader.js';
import type { UpstreamResult } from './types.js';

/**
 * An MCP task read the gate follows (MCP Tasks): `tasks/get` or `tasks/result` for one task id,
 * on a route a `jsonrpc` tool governs. Never a proposal; its answer is evidence for the accepted
 * operation whose reference is that task id.
 */
export interface TaskRead {
  readonly method: 'tasks/get' | 'tasks/result';
  readonly taskId: string;
  /** The `jsonrpc` tools of the route: only their accepted operations are settled by the answer. */
  readonly toolIds: readonly string[];
}

/** The task read `body` is, or `null` (`tasks/list`, no task id, not a task read). */
export function taskReadOf(body: unknown, toolIds: readonly string[]): TaskRead | null {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return null;
  const { method, params } = body as Record<string, unknown>;
  if (method !== 'tasks/get' && method !== 'tasks/result') return null;
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return null;
  const taskId = (params as Record<string, unknown>)['taskId'];
  if (typeof taskId !== 'string' || taskId === '' || taskId.length > 500) return null;
  return { method, taskId, toolIds };
}

const decoder = new TextDecoder();
const MAX_EVENT_BYTES = 1 << 20;

/** The JSON-RPC responses an answer holds: the JSON body, or each event of an SSE stream. */
function responsesOf(sent: UpstreamResult): unknown[] {
  if (sent.kind !== 'response') return [];
  const text = decoder.decode(sent.body);
  const contentType = sent.headers['content-type'];
  const parts = isEventStream(Array.isArray(contentType) ? contentType[0] : contentType)
    ? new SseReader(MAX_EVENT_BYTES).feed(text)
    : [text];
  const out: unknown[] = [];
  for (const part of parts) {
    try {
      out.push(JSON.parse(part));
    } catch {
      // Not a JSON-RPC message (a comment, a cut-off stream): says nothing.
    }
  }
  return out;
}

/**
 * How the answer says the task ended: `succeeded` (tasks/get `completed`, or tasks/result's result
 * without `isError`), `failed` (`failed`, `cancelled`, or an `isError` result), or `null` (still
 * `working` / `input_required`, an error answer, nothing readable).
 */
export function taskSettlement(read: TaskRead, sent: UpstreamResult): 'succeeded' | 'failed' | null {
  if (sent.kind !== 'response' || sent.status < 200 || sent.status > 299) return null;
  for (const message of responsesOf(sent)) {
    if (message === null || typeof message !== 'object') continue;
    const result = (message as Record<string, unknown>)['result'];
    if (result === null || typeof result !== 'object' || Array.isArray(result)) continue;
    const r = result as Record<string, unknown>;
    if (read.method === 'tasks/get') {
      // The task itself is the result (MCP Tasks, GetTaskResult); some servers nest it under `task`.
      const task = (typeof r['task'] === 'object' && r['task'] !== null ? r['task'] : r) as Record<
        string,
        unknown
      >;
      if (task['taskId'] !== undefined && task['taskId'] !== read.taskId) continue;
      if (task['status'] === 'completed') return 'succeeded';
      if (task['status'] === 'failed' || task['status'] === 'cancelled') return 'failed';
      continue;
    }
    return r['isError'] === true ? 'failed' : 'succeeded';
  }
  return null;
}

/**
 * Records what a task read's answer says as a `read_back` observation on each accepted operation
 * of the route's tools whose reference is the task id (eg_add_observation.sql settles it: succeeded
 * confirms the key, failed releases it). Answers how many it recorded.
 */
export async function settleTaskRead(read: TaskRead, sent: UpstreamResult, store: Store): Promise<number> {
  const settles = taskSettlement(read, sent);
  if (settles === null || sent.kind !== 'response') return 0;
  const ops = await store.findOperations({ destinationRef: read.taskId });
  let recorded = 0;
  for (const op of ops) {
    if (op.state !== 'accepted' || !read.toolIds.includes(op.toolId)) continue;
    // An earlier attempt's task (the operation was retried since) speaks for that attempt only.
    const last = op.attempts.at(-1);
    if (last === undefined || last.destinationRef !== read.taskId) continue;
    const result = await store.addObservation({
      operationId: op.id,
      kind: 'read_back',
      by: `MCP ${read.method} ${read.taskId}`.slice(0, 200),
      reason: `${read.method} for task ${read.taskId}: ${settles}`,
      settles,
      status: sent.status,
      destinationRef: read.taskId,
      refs: [],
      payloadFingerprint: `sha256:${createHash('sha256').update(sent.body).digest('hex')}`,
      source: 'gate',
      asOfAttemptId: last.id,
    });
    if (!result.alreadyRecorded) recorded++;
  }
  return recorded;
}
