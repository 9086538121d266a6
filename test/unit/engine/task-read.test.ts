import { describe, expect, it } from 'vitest';
import { taskReadOf, taskSettlement } from '../../../src/engine/task-read.js';
import type { UpstreamResult } from '../../../src/engine/types.js';

const encoder = new TextEncoder();
const answer = (result: unknown, sse = false, status = 200): UpstreamResult => {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, ...(result as object) });
  return {
    kind: 'response',
    status,
    headers: { 'content-type': sse ? 'text/event-stream' : 'application/json' },
    body: encoder.encode(sse ? `event: message\ndata: ${body}\n\n` : body),
  };
};
const get = taskReadOf({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: 't-1' } }, ['mcp.x'])!;
const result = taskReadOf({ jsonrpc: '2.0', id: 1, method: 'tasks/result', params: { taskId: 't-1' } }, [
  'mcp.x',
])!;

describe('MCP task reads', () => {
  it('follows tasks/get and tasks/result with a task id, nothing else', () => {
    expect(get).toEqual({ method: 'tasks/get', taskId: 't-1', toolIds: ['mcp.x'] });
    expect(taskReadOf({ method: 'tasks/list', params: {} }, ['mcp.x'])).toBeNull();
    expect(taskReadOf({ method: 'tasks/get', params: {} }, ['mcp.x'])).toBeNull();
    expect(taskReadOf({ method: 'tools/call', params: { taskId: 't-1' } }, ['mcp.x'])).toBeNull();
  });

  it('reads how the task ended from tasks/get, JSON or streamed', () => {
    const status = (s: string, sse = false) =>
      taskSettlement(get, answer({ result: { taskId: 't-1', status: s } }, sse));
    expect(status('completed')).toBe('succeeded');
    expect(status('completed', true)).toBe('succeeded');
    expect(status('failed')).toBe('failed');
    expect(status('cancelled', true)).toBe('failed');
    expect(status('working')).toBeNull();
    expect(status('input_required')).toBeNull();
    // Another task's status, an error, a non-2xx answer: nothing.
    expect(taskSettlement(get, answer({ result: { taskId: 't-2', status: 'completed' } }))).toBeNull();
    expect(taskSettlement(get, answer({ error: { code: -32602, message: 'no such task' } }))).toBeNull();
    expect(
      taskSettlement(get, answer({ result: { taskId: 't-1', status: 'completed' } }, false, 500)),
    ).toBeNull();
  });

  it("reads tasks/result's tool result: isError is a failure", () => {
    expect(taskSettlement(result, answer({ result: { content: [] } }))).toBe('succeeded');
    expect(taskSettlement(result, answer({ result: { content: [], isError: true } }, true))).toBe('failed');
    expect(taskSettlement(result, answer({ error: { code: -32603, message: 'boom' } }))).toBeNull();
  });
});
