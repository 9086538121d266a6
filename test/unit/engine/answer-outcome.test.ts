/**
 * The outcome of a response read on the destination's own terms (docs/design.md §outcomes): the
 * status first, then, only when it says succeeded, `unknown_if` and `failed_if` over the JSON
 * answer. An answer the gate cannot read while conditions exist is `unknown`, never `succeeded`.
 */
import { describe, expect, it } from 'vitest';
import { acceptedRefOf, answerOutcome } from '../../../src/engine/answer-outcome.js';
import { jsonRpcOutcome } from '../../../src/engine/jsonrpc-outcome.js';
import { parsePolicyFiles, type Tool } from '../../../src/policy/index.js';

function tool(outcome: string, extra = ''): Tool {
  return parsePolicyFiles([
    {
      file: 't.yaml',
      text: `
version: 1
tools:
  - id: t
    match: { hosts: [api.example], method: POST, path: /post }
    effect: notify
${extra}
    outcome:
${outcome}
`,
    },
  ]).tools[0]!;
}

const enc = (v: unknown): Uint8Array =>
  new TextEncoder().encode(typeof v === 'string' ? v : JSON.stringify(v));

const slack = tool(`      failed_if: { $.ok: false }
      unknown_if:
        - { path: $.job, non_empty: true }
      error_code: $.error`);

describe('answerOutcome', () => {
  it('calls a 200 whose answer says ok: false failed, with the rule and the error code', () => {
    expect(answerOutcome(slack, 200, enc({ ok: false, error: 'not_in_channel' }))).toEqual({
      state: 'failed',
      rule: 'failed_if $.ok == false',
      errorCode: 'not_in_channel',
    });
  });

  it('calls a 200 whose answer says ok: true succeeded by its status, with no error code', () => {
    expect(answerOutcome(slack, 200, enc({ ok: true, ts: '1.2', error: 'x' }))).toEqual({
      state: 'succeeded',
      rule: 'status 200',
      errorCode: null,
    });
  });

  it('checks unknown_if before failed_if', () => {
    expect(answerOutcome(slack, 200, enc({ ok: false, job: 'j1' }))).toMatchObject({
      state: 'unknown',
      rule: 'unknown_if $.job non_empty',
    });
  });

  it('calls an answer it cannot read unknown when conditions exist', () => {
    for (const [body, why] of [
      ['ok', 'not JSON'],
      ['{"ok":true,"ok":false}', 'duplicate member $.ok'],
      [`${'['.repeat(100)}${']'.repeat(100)}`, 'too large to read'],
      [new Uint8Array([0xff, 0xfe]), 'not UTF-8'],
    ] as const) {
      const bytes = typeof body === 'string' ? enc(body) : body;
      expect(answerOutcome(slack, 200, bytes), why).toMatchObject({
        state: 'unknown',
        rule: `unreadable answer (${why})`,
      });
    }
  });

  it('leaves a status that is not succeeded as it is, and reads its error code', () => {
    expect(answerOutcome(slack, 429, enc({ ok: false, error: 'ratelimited' }))).toEqual({
      state: 'failed',
      rule: 'status 429',
      errorCode: 'ratelimited',
    });
    expect(answerOutcome(slack, 503, enc('down'))).toEqual({
      state: 'unknown',
      rule: 'status 503',
      errorCode: null,
    });
  });

  it('records no error code that is not a short identifier (a message may echo what was sent)', () => {
    for (const error of ['channel C1 says: hello secret', 'x'.repeat(65), { code: 'a' }, true])
      expect(
        answerOutcome(slack, 200, enc({ ok: false, error })).errorCode,
        JSON.stringify(error),
      ).toBeNull();
    expect(answerOutcome(slack, 200, enc({ ok: false, error: 'a.b:c-d_1' })).errorCode).toBe('a.b:c-d_1');
    expect(answerOutcome(slack, 200, enc({ ok: false, error: 40001 })).errorCode).toBe('40001');
  });

  it('names the status for a tool without conditions, and reads nothing', () => {
    const plain = tool('      succeeded: [2xx]');
    expect(answerOutcome(plain, 201, enc('not json'))).toEqual({
      state: 'succeeded',
      rule: 'status 201',
      errorCode: null,
    });
  });
});

describe('answer conditions on a JSON-RPC tool', () => {
  const mcp = tool(
    `      failed_if:
        - { path: $.result.structuredContent.ok, equals: false }
      error_code: $.result.structuredContent.code`,
    '    verdict: { protocol: jsonrpc }',
  );
  const rpc = (result: unknown): Uint8Array => enc({ jsonrpc: '2.0', id: 1, result });

  it('reads them over the JSON-RPC response object', () => {
    expect(
      jsonRpcOutcome(mcp, 1, 200, 'application/json', rpc({ structuredContent: { ok: false, code: 'E1' } })),
    ).toMatchObject({
      operationState: 'failed',
      rule: 'failed_if $.result.structuredContent.ok == false',
      errorCode: 'E1',
    });
    expect(
      jsonRpcOutcome(mcp, 1, 200, 'application/json', rpc({ structuredContent: { ok: true } })),
    ).toMatchObject({
      operationState: 'succeeded',
      rule: 'jsonrpc result',
    });
  });

  it('names the JSON-RPC rule that decided', () => {
    const error = enc({ jsonrpc: '2.0', id: 1, error: { code: -32000, message: 'm' } });
    expect(jsonRpcOutcome(mcp, 1, 200, 'application/json', error).rule).toBe('jsonrpc error');
    expect(jsonRpcOutcome(mcp, 1, 200, 'application/json', rpc({ isError: true })).rule).toBe('mcp isError');
    expect(jsonRpcOutcome(mcp, 2, 200, 'application/json', rpc({})).rule).toBe('no jsonrpc response');
  });
});

describe('outcome.accepted', () => {
  const jobs = tool('      accepted: [202]');
  const byRef = tool('      accepted: [202]\n      accepted_ref: $.job.url');

  it('calls a listed status accepted, by its rule, and reads the reference from Location or accepted_ref', () => {
    expect(answerOutcome(jobs, 202, enc({ id: 1 }))).toEqual({
      state: 'accepted',
      rule: 'accepted 202',
      errorCode: null,
    });
    expect(answerOutcome(jobs, 201, enc({}))).toMatchObject({ state: 'succeeded', rule: 'status 201' });
    expect(acceptedRefOf(jobs, { location: '/jobs/1' }, enc({}))).toBe('/jobs/1');
    expect(acceptedRefOf(jobs, {}, enc({}))).toBeNull();
    expect(acceptedRefOf(byRef, { location: '/x' }, enc({ job: { url: 'https://j/9' } }))).toBe(
      'https://j/9',
    );
  });

  it('calls an MCP tools/call answered with a working task accepted, the task id its reference', () => {
    const mcp = tool('      tool_error: failed', '    verdict: { protocol: jsonrpc }');
    const body = enc({ jsonrpc: '2.0', id: 3, result: { task: { taskId: 't-42', status: 'working' } } });
    expect(jsonRpcOutcome(mcp, 3, 200, 'application/json', body)).toMatchObject({
      operationState: 'accepted',
      destinationRef: 't-42',
      rule: 'mcp task working',
    });
    const done = enc({ jsonrpc: '2.0', id: 3, result: { task: { taskId: 't-42', status: 'completed' } } });
    expect(jsonRpcOutcome(mcp, 3, 200, 'application/json', done).operationState).toBe('succeeded');
  });
});
