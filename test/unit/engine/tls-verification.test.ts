/** What the agent is told when the destination's certificate does not verify. */
import { describe, expect, it } from 'vitest';
import { classifyFailure } from '../../../src/engine/classify-failure.js';
import { dispatchFailureFacts } from '../../../src/engine/dispatch-outcome.js';
import { upstreamFailedResponse } from '../../../src/engine/problem-response.js';
import { isTlsVerificationFailure, tlsVerificationAdvice } from '../../../src/engine/tls-verification.js';
import type { VerdictFacts } from '../../../src/engine/verdict-response.js';

const CODES = [
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
];

const allowed: VerdictFacts = {
  verdict: 'allow',
  status: 200,
  title: 'Allowed',
  detail: '',
  tool: null,
  decisionId: 'd1',
  operationId: 'o1',
};

describe.each(CODES)('%s', (code) => {
  it('is a definite failure before anything was sent', () => {
    expect(isTlsVerificationFailure(code)).toBe(true);
    const failure = classifyFailure(Object.assign(new Error(code), { code }), false);
    expect(failure.dispatchState).toBe('not_sent');
  });

  it('is answered naming --upstream-ca, and why a repeat is safe but fails the same way', () => {
    const advice = tlsVerificationAdvice(code)!;
    expect(advice).toContain(`(${code})`);
    expect(advice).toContain('--upstream-ca');
    expect(advice).toContain('No byte of the request was sent');
    expect(advice).toContain('repeating the call is safe, but it fails the same way until');
    const body = JSON.parse(new TextDecoder().decode(upstreamFailedResponse(code, false).body));
    expect(body).toMatchObject({ status: 502, code: 'EG_ERR_UPSTREAM_FAILED', detail: advice });
  });

  it('never calls a retry safe when an earlier attempt of the operation may have done the effect', () => {
    const failure = { kind: 'failure', dispatchState: 'not_sent', timedOut: false, error: code } as const;
    const facts = dispatchFailureFacts(allowed, failure, 'unknown');
    expect(facts.detail).toContain('--upstream-ca');
    expect(facts.detail).not.toContain('safe');
    expect(facts.detail).toContain('its outcome stays unknown');
    expect(dispatchFailureFacts(allowed, failure, 'failed').detail).toContain('repeating the call is safe');
  });
});

describe('other failures', () => {
  it.each(['ECONNREFUSED', 'ERR_SSL_WRONG_VERSION_NUMBER', 'ECONNRESET'])(
    '%s keeps its own wording',
    (code) => {
      expect(isTlsVerificationFailure(code)).toBe(false);
      expect(tlsVerificationAdvice(code)).toBeNull();
      const body = JSON.parse(new TextDecoder().decode(upstreamFailedResponse(code, false).body));
      expect(body.detail).toBe(`The destination gave no usable response (${code}).`);
    },
  );
});
