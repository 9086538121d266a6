import { describe, expect, it } from 'vitest';
import { StoreAnswerError } from '../../../src/errors.js';
import { batchAnswers, decideAnswer, outcomeAnswer } from '../../../src/store/hot-answers.js';

/** An allow as eg_allow.sql builds it. */
const allow = {
  verdict: 'allow',
  decisionId: 'd1',
  operationId: 'o1',
  attemptId: 'a1',
  attemptNumber: 1,
  retryOfAttemptId: null,
  retryReason: null,
  retryDecision: null,
  supersedesOperationId: null,
  idempotencyKey: 'o1',
};

function refusal(check: () => unknown): StoreAnswerError {
  try {
    check();
  } catch (err) {
    expect(err).toBeInstanceOf(StoreAnswerError);
    expect(err).toMatchObject({ code: 'EG_ERR_STORE_ANSWER_INVALID' });
    return err as StoreAnswerError;
  }
  throw new Error('not refused');
}

describe('the hot path wire contract', () => {
  it('passes a well-formed answer through, frozen, with fields it does not read', () => {
    const answer = decideAnswer({ ...allow, fromANewerStore: 1 });
    expect(answer).toMatchObject(allow);
    expect(Object.isFrozen(answer)).toBe(true);
    const pending = decideAnswer({
      verdict: 'pending',
      decisionId: null,
      operationId: 'o1',
      operationState: 'open',
    });
    expect(pending.verdict).toBe('pending');
    // A shadow-mode hold (would_hold) made no approval card: its approvalId is null.
    const wouldHold = {
      verdict: 'hold',
      decisionId: 'd2',
      operationId: 'o1',
      approvalId: null,
      previousAttemptId: 'a1',
      previousDispatchState: 'sent_no_response',
      requestChanged: false,
      approvedRequest: null,
      lastApproval: null,
    };
    expect(decideAnswer(wouldHold)).toMatchObject({ verdict: 'hold', approvalId: null });
    expect(refusal(() => decideAnswer({ ...wouldHold, approvalId: 7 })).field).toBe('approvalId');
    expect(Object.isFrozen(outcomeAnswer({ operationState: null, alreadyRecorded: true }))).toBe(true);
  });

  it('names the field of a malformed decide answer', () => {
    expect(refusal(() => decideAnswer({ ...allow, attemptNumber: '1' })).field).toBe('attemptNumber');
    expect(refusal(() => decideAnswer({ ...allow, attemptId: undefined })).message).toMatch(
      /eg_decide answered .*: attemptId is missing in a allow answer, not string/,
    );
    expect(refusal(() => decideAnswer({ ...allow, verdict: 'maybe' })).field).toBe('verdict');
    expect(refusal(() => decideAnswer({ ...allow, verdict: 'toString' })).field).toBe('verdict');
    expect(refusal(() => decideAnswer({ ...allow, idempotencyKey: 5 })).field).toBe('idempotencyKey');
    expect(refusal(() => decideAnswer(null)).field).toBe('the answer');
    expect(refusal(() => decideAnswer([allow])).field).toBe('the answer');
    expect(
      refusal(() =>
        decideAnswer({ verdict: 'reconcile', decisionId: 'd1', operationId: 'o1', attemptId: null }),
      ).field,
    ).toBe('decisionId');
  });

  it('names the field of a malformed outcome answer, and refuses a batch of another length', () => {
    expect(refusal(() => outcomeAnswer({ operationState: 3 })).field).toBe('operationState');
    expect(refusal(() => outcomeAnswer('{"operationState":null}')).field).toBe('the answer');
    expect(batchAnswers([allow, allow], 2)).toHaveLength(2);
    expect(refusal(() => batchAnswers([allow], 2)).message).toMatch(/has 1 results for 2 calls/);
    expect(refusal(() => batchAnswers(null, 2)).message).toMatch(/is not an array/);
  });
});
