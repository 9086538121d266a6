import { describe, expect, it } from 'vitest';
import {
  jsonRpcId,
  negotiateProblemType,
  renderVerdict,
  type VerdictFacts,
} from '../../../src/engine/verdict-response.js';
import type { Tool } from '../../../src/policy/index.js';

const httpTool = { id: 'github.create_issue', verdict: { protocol: 'http' } } as unknown as Tool;
const rpcTool = { id: 'mcp.create_ticket', verdict: { protocol: 'jsonrpc' } } as unknown as Tool;
const gqlTool = { id: 'linear.issue_create', verdict: { protocol: 'graphql' } } as unknown as Tool;

const duplicate: VerdictFacts = {
  verdict: 'duplicate',
  status: 409,
  title: 'Duplicate effect skipped',
  detail: 'Already done by run r1.',
  tool: httpTool,
  decisionId: 'd2',
  operationId: 'op1',
  source: {
    runId: 'r1',
    step: 's1',
    operationId: 'op1',
    attemptId: 'a1',
    confirmedAt: '2026-01-01T00:00:00Z',
    destinationRef: 'u',
  },
};

const json = (b: Uint8Array): Record<string, unknown> => JSON.parse(new TextDecoder().decode(b));

describe('negotiateProblemType', () => {
  it.each([
    [undefined, 'application/problem+json'],
    ['*/*', 'application/problem+json'],
    ['application/json', 'application/json'],
    ['application/json, application/problem+json;q=0', 'application/json'],
    ['application/problem+json', 'application/problem+json'],
    ['text/html', 'application/problem+json'],
    ['application/*', 'application/problem+json'],
  ])('Accept %s → %s', (accept, expected) => {
    expect(negotiateProblemType(accept)).toBe(expected);
  });
});

describe('renderVerdict', () => {
  it("renders a GraphQL tool's verdict as a GraphQL error response: 200, data null, the facts in extensions", () => {
    const r = renderVerdict(
      { ...duplicate, tool: gqlTool, extra: { code: 'EG_ERR_X', dispatch_state: 'not_sent' } },
      { accept: 'application/problem+json' },
      null,
    );
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['effectgate-verdict']).toBe('duplicate');
    const body = json(r.body);
    expect(body).toEqual({
      data: null,
      errors: [
        {
          message: 'Already done by run r1.',
          extensions: expect.objectContaining({
            code: 'EFFECTGATE_DUPLICATE',
            error_code: 'EG_ERR_X',
            verdict: 'duplicate',
            status: 409,
            tool: 'linear.issue_create',
            operation_id: 'op1',
            dispatch_state: 'not_sent',
            source: expect.objectContaining({ run_id: 'r1' }),
          }),
        },
      ],
    });
  });

  it('renders an RFC 9457 problem with message, verdict facts and Effectgate headers', () => {
    const r = renderVerdict(duplicate, {}, null);
    expect(r.status).toBe(409);
    expect(r.headers['content-type']).toBe('application/problem+json');
    expect(r.headers['effectgate-verdict']).toBe('duplicate');
    expect(r.headers['effectgate-decision']).toBe('d2');
    expect(r.headers['effectgate-operation']).toBe('op1');
    const body = json(r.body);
    expect(body).toMatchObject({
      type: 'urn:effectgate:verdict:duplicate',
      status: 409,
      detail: 'Already done by run r1.',
      message: 'Already done by run r1.',
      verdict: 'duplicate',
      tool: 'github.create_issue',
      decision_id: 'd2',
      operation_id: 'op1',
      source: { run_id: 'r1', step: 's1', operation_id: 'op1', attempt_id: 'a1', destination_ref: 'u' },
    });
  });

  it('says source: null when the source is unknown, never inventing one', () => {
    const body = json(renderVerdict({ ...duplicate, source: null }, {}, null).body);
    expect(body['source']).toBeNull();
  });

  it('sends Retry-After on pending', () => {
    const r = renderVerdict(
      { ...duplicate, verdict: 'pending', source: undefined, retryAfterSeconds: 2 },
      {},
      null,
    );
    expect(r.headers['retry-after']).toBe('2');
  });

  it('renders a JSON-RPC error with the request id and HTTP 200 for jsonrpc tools', () => {
    const r = renderVerdict(
      { ...duplicate, tool: rpcTool },
      {},
      jsonRpcId({ jsonrpc: '2.0', id: 7, method: 'tools/call' }),
    );
    expect(r.status).toBe(200);
    const body = json(r.body) as {
      id: number;
      error: { code: number; message: string; data: Record<string, unknown> };
    };
    expect(body.id).toBe(7);
    expect(body.error.message).toBe('Already done by run r1.');
    expect(body.error.data['verdict']).toBe('duplicate');
    expect(body.error.code).toBeLessThanOrEqual(-32000);
  });
});
