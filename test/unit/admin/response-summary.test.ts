/**
 * The trail's one-line response summary (CLI trail, timeline page): a `failed` attempt with HTTP
 * 200 says which rule of the tool's outcome contract decided, and the destination's error code.
 */
import { describe, expect, it } from 'vitest';
import { responseSummary } from '../../../src/admin/trail.js';
import type { AttemptRecord } from '../../../src/store/index.js';

const attempt = (extra: Partial<AttemptRecord>): AttemptRecord =>
  ({
    dispatchState: 'response_received',
    status: 200,
    destinationRef: null,
    replayed: null,
    error: null,
    recoveredAt: null,
    outcomeRule: null,
    errorCode: null,
    ...extra,
  }) as AttemptRecord;

describe('responseSummary', () => {
  it('names the rule that decided when the status alone does not say it, and the error code', () => {
    expect(
      responseSummary(attempt({ outcomeRule: 'failed_if $.ok == false', errorCode: 'not_in_channel' })),
    ).toBe('HTTP 200, decided by failed_if $.ok == false, error code not_in_channel');
    expect(responseSummary(attempt({ outcomeRule: 'jsonrpc error' }))).toBe(
      'HTTP 200, decided by jsonrpc error',
    );
  });

  it('says nothing more when the status decided (or an older gate recorded no rule)', () => {
    expect(
      responseSummary(attempt({ status: 201, outcomeRule: 'status 201', destinationRef: 'https://x/1' })),
    ).toBe('HTTP 201, ref https://x/1');
    expect(responseSummary(attempt({ status: 201 }))).toBe('HTTP 201');
  });
});
