import { describe, expect, it } from 'vitest';
import { shadowSummary } from '../../../src/admin/index.js';

/*
 * What a shadow decision's trail line claims: only what the store knows. A would_* decision
 * without its dispatch row may be a gate killed before the send itself (the decision commits
 * first), so that line must not say the request was sent.
 */
describe('shadowSummary', () => {
  it('says nothing of enforced verdicts', () => {
    expect(shadowSummary({ verdict: 'duplicate', shadow_dispatch: null })).toBeNull();
    expect(shadowSummary({ verdict: 'allow', shadow_dispatch: null })).toBeNull();
  });

  it('names what came back when it was recorded', () => {
    expect(
      shadowSummary({
        verdict: 'would_duplicate',
        shadow_dispatch: { dispatch_state: 'response_received', status: 201, duration_ms: 12.4, error: null },
      }),
    ).toBe('shadow mode: enforce mode would have skipped it as a duplicate; sent anyway, HTTP 201 in 12 ms');
    expect(
      shadowSummary({
        verdict: 'would_hold',
        shadow_dispatch: {
          dispatch_state: 'sent_no_response',
          status: null,
          duration_ms: 30,
          error: 'ECONNRESET',
        },
      }),
    ).toMatch(/would have held it for an approval .*; sent anyway, sent_no_response: ECONNRESET$/);
  });

  it('without a record does not claim the request was sent', () => {
    const line = shadowSummary({ verdict: 'would_block', shadow_dispatch: null });
    expect(line).not.toMatch(/; sent anyway/);
    expect(line).toContain('possibly before sending it');
  });
});
