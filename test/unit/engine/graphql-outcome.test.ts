/**
 * A GraphQL mutation's outcome from its answer's data and errors: a GraphQL server answers 200
 * for a mutation that did nothing, so the status alone would confirm a key for nothing.
 */
import { describe, expect, it } from 'vitest';
import { graphqlOutcome } from '../../../src/engine/graphql-outcome.js';
import { parsePolicyFiles, type Tool } from '../../../src/policy/index.js';

const [tool] = parsePolicyFiles([
  {
    file: 'g.yaml',
    text: `
version: 1
tools:
  - id: linear.issue_create
    match: { hosts: [api.linear.app], method: POST, path: /graphql, graphql: { mutation: issueCreate } }
    effect: create
    response: { ref: $.data.made.issue.id }
    verdict: { protocol: graphql }
`,
  },
]).tools as [Tool];

const call = { field: 'issueCreate', responseName: 'made' };
const bytes = (v: unknown): Uint8Array =>
  new TextEncoder().encode(typeof v === 'string' ? v : JSON.stringify(v));
const outcome = (body: unknown, status = 200): ReturnType<typeof graphqlOutcome> =>
  graphqlOutcome(tool, call, status, bytes(body));

describe('graphqlOutcome', () => {
  it('succeeds when the field answers under its response name, errors of sub-selections or not', () => {
    expect(outcome({ data: { made: { success: true, issue: { id: 'I-1' } } } })).toEqual({
      operationState: 'succeeded',
      destinationRef: 'I-1',
      note: null,
      rule: 'graphql data.made',
      errorCode: null,
    });
    expect(
      outcome({ data: { made: { issue: null } }, errors: [{ message: 'x', path: ['made', 'issue'] }] })
        .operationState,
    ).toBe('succeeded');
  });

  it('fails on errors with the field null or absent, recording a scalar extensions.code only', () => {
    expect(
      outcome({ data: null, errors: [{ message: 'bad', extensions: { code: 'INVALID_INPUT' } }] }),
    ).toEqual({
      operationState: 'failed',
      destinationRef: null,
      note: 'GraphQL error INVALID_INPUT',
      rule: 'graphql errors',
      errorCode: 'INVALID_INPUT',
    });
    expect(outcome({ data: { made: null }, errors: [{ message: 'x', extensions: { code: 7 } }] }).note).toBe(
      'GraphQL error 7',
    );
    expect(
      outcome({ errors: [{ message: 'secret title echoed', extensions: { code: { a: 1 } } }] }).note,
    ).toBe('GraphQL error (no code)');
    expect(outcome({ errors: [{ message: 'x', extensions: { code: 'x'.repeat(101) } }] }).note).toBe(
      'GraphQL error (no code)',
    );
  });

  it('is unknown for an answer that says neither: not JSON, no data nor errors, a null field without an error', () => {
    const bodies = [
      '<html>',
      [],
      { data: { made: null } },
      { data: { other: 1 } },
      { errors: [] },
      {},
      // Parsers disagree on which of two members counts: not trusted either way.
      '{"data":{"made":{"id":1}},"data":null,"errors":[{"message":"x"}]}',
    ];
    for (const body of bodies) {
      expect(outcome(body).operationState, JSON.stringify(body)).toBe('unknown');
    }
    // The answer to another field's name is not this mutation's.
    expect(outcome({ data: { issueCreate: { success: true } } }).operationState).toBe('unknown');
  });

  it("applies the tool's own answer conditions and error code over the whole answer", () => {
    const [strict] = parsePolicyFiles([
      {
        file: 's.yaml',
        text: `
version: 1
tools:
  - id: t
    match: { hosts: [h.example], method: POST, path: /graphql, graphql: { mutation: issueCreate } }
    effect: create
    outcome: { failed_if: { $.data.made.success: false }, error_code: "$.errors[0].extensions.type" }
`,
      },
    ]).tools as [Tool];
    const said = (body: unknown): ReturnType<typeof graphqlOutcome> =>
      graphqlOutcome(strict, call, 200, bytes(body));
    expect(said({ data: { made: { success: false } } })).toMatchObject({
      operationState: 'failed',
      rule: expect.stringContaining('failed_if'),
    });
    expect(said({ data: { made: { success: true } } }).operationState).toBe('succeeded');
    expect(
      said({ data: null, errors: [{ extensions: { code: 'A', type: 'invalid_input' } }] }).errorCode,
    ).toBe('invalid_input');
  });

  it('keeps the class the tool contract gives a non-2xx status', () => {
    expect(outcome({ errors: [{ message: 'x' }] }, 400).operationState).toBe('failed');
    expect(outcome({ data: { made: { id: 1 } } }, 503).operationState).toBe('unknown');
  });
});
