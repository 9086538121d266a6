import { describe, expect, it } from 'vitest';
import { classifyFailure, errorCode } from '../../../src/engine/classify-failure.js';

function err(code: string): Error {
  return Object.assign(new Error(code), { code });
}

describe('classifyFailure', () => {
  it.each([
    'ENOTFOUND',
    'EAI_AGAIN',
    'ECONNREFUSED',
    'EHOSTUNREACH',
    'ENETUNREACH',
    'UND_ERR_CONNECT_TIMEOUT',
    'DEPTH_ZERO_SELF_SIGNED_CERT',
    'ERR_TLS_CERT_ALTNAME_INVALID',
    'ERR_SSL_WRONG_VERSION_NUMBER',
    'UND_ERR_INVALID_ARG',
  ])('%s before the request started is not_sent', (code) => {
    expect(classifyFailure(err(code), false)).toMatchObject({
      kind: 'failure',
      dispatchState: 'not_sent',
      error: code,
    });
  });

  it.each([
    'UND_ERR_SOCKET',
    'ECONNRESET',
    'EPIPE',
    'UND_ERR_HEADERS_TIMEOUT',
    'UND_ERR_BODY_TIMEOUT',
    'UND_ERR_ABORTED',
    'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH',
    'SOMETHING_NEW',
  ])('%s is sent_no_response even before the request started', (code) => {
    expect(classifyFailure(err(code), false).dispatchState).toBe('sent_no_response');
  });

  it('never says not_sent once undici began writing the request', () => {
    expect(classifyFailure(err('ECONNREFUSED'), true).dispatchState).toBe('sent_no_response');
    expect(classifyFailure(err('ENOTFOUND'), true).dispatchState).toBe('sent_no_response');
  });

  it('marks timeouts', () => {
    expect(classifyFailure(err('UND_ERR_HEADERS_TIMEOUT'), true).timedOut).toBe(true);
    expect(classifyFailure(err('UND_ERR_BODY_TIMEOUT'), true).timedOut).toBe(true);
    expect(classifyFailure(err('UND_ERR_CONNECT_TIMEOUT'), false)).toMatchObject({
      dispatchState: 'not_sent',
      timedOut: true,
    });
    expect(classifyFailure(err('UND_ERR_SOCKET'), true).timedOut).toBe(false);
  });

  it('treats errors without a code as sent_no_response', () => {
    expect(classifyFailure(new Error('boom'), false)).toMatchObject({
      dispatchState: 'sent_no_response',
      error: 'unknown_error',
    });
    expect(classifyFailure('weird', false).dispatchState).toBe('sent_no_response');
  });
});

describe('errorCode', () => {
  it('reads the code, an AggregateError inner code, or the class name', () => {
    expect(errorCode(err('ECONNRESET'))).toBe('ECONNRESET');
    expect(errorCode(new AggregateError([err('ECONNREFUSED'), err('ECONNREFUSED')]))).toBe('ECONNREFUSED');
    expect(errorCode(new TypeError('x'))).toBe('TypeError');
    expect(errorCode(null)).toBe('unknown_error');
  });
});
