import { describe, expect, it } from 'vitest';
import { renderStoreUnavailable, transportProblem } from '../../../src/engine/problem-response.js';
import { speakRefusal } from '../../../src/engine/refusal-dialects.js';
import type { GateResponse } from '../../../src/engine/types.js';

const body = (r: GateResponse): Record<string, unknown> =>
  JSON.parse(new TextDecoder().decode(r.body)) as Record<string, unknown>;

const refusal = (): GateResponse =>
  transportProblem('graphql_invalid', 'The GraphQL document cannot be read (syntax). Nothing was sent.');

describe('speakRefusal', () => {
  it('keeps problem+json for the http dialect, byte for byte', () => {
    const r = refusal();
    expect(speakRefusal(r, 'http', null)).toBe(r);
  });

  it('answers a GraphQL refusal as a GraphQL error over 200 carrying the problem', () => {
    const r = speakRefusal(refusal(), 'graphql', null);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['cache-control']).toBe('no-store');
    expect(body(r)).toEqual({
      data: null,
      errors: [
        {
          message: 'The GraphQL document cannot be read (syntax). Nothing was sent.',
          extensions: expect.objectContaining({
            code: 'EFFECTGATE_GRAPHQL_INVALID',
            error_code: 'EG_ERR_GRAPHQL_INVALID',
            status: 400,
          }),
        },
      ],
    });
  });

  it('answers a refusal as a 400 Stripe will not retry and a 422 GitHub', () => {
    const stripe = speakRefusal(refusal(), 'stripe', null);
    expect(stripe.status).toBe(400);
    expect(stripe.headers['stripe-should-retry']).toBe('false');
    expect(body(stripe)['error']).toMatchObject({
      type: 'invalid_request_error',
      code: 'effectgate_graphql_invalid',
    });
    expect(speakRefusal(refusal(), 'github', null).status).toBe(422);
  });

  it('answers a store outage for Stripe as a 503 with Retry-After that says not to retry', () => {
    const r = renderStoreUnavailable(
      { id: 'stripe.pay', effect: 'financial', verdict: { protocol: 'stripe' } },
      null,
    );
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('5');
    expect(r.headers['stripe-should-retry']).toBe('false');
    expect(body(r)['error']).toMatchObject({ type: 'api_error', code: 'effectgate_store_unavailable' });
  });
});
