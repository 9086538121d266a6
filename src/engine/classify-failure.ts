/**
 * Decides what an upstream failure means for the attempt (docs/design.md §3): `not_sent` is a promise
 * that the destination cannot have acted, so it is given only when BOTH hold:
 *
 *   1. undici never began writing this request: `onRequestStart` fires in undici's `writeH1` just
 *      before the first byte of the request goes on the socket, so an error without it happened
 *      while resolving, connecting or handshaking;
 *   2. the error is one that can only happen before a request is written (DNS, refused or
 *      unreachable connect, connect timeout, TLS handshake or certificate, or a local refusal such
 *      as an invalid header or a closed client).
 *
 * Everything else (a reset or close after writing began, a headers or body timeout, an abort, an
 * unknown error) is `sent_no_response`: the destination may have performed the effect.
 */
import { isTlsVerificationFailure } from './tls-verification.js';
import type { UpstreamResult } from './types.js';

export type UpstreamFailure = Extract<UpstreamResult, { kind: 'failure' }>;

const PRE_DISPATCH_CODES: ReadonlySet<string> = new Set([
  // Name resolution.
  'ENOTFOUND',
  'EAI_AGAIN',
  'EAI_FAIL',
  'EAI_NONAME',
  'EAI_NODATA',
  // TCP connect.
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'EADDRNOTAVAIL',
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  // Refused by the egress policy in the connector, before the socket connected (docs/design.md §4.1).
  'EG_ERR_DESTINATION_REFUSED',
  // Refused locally by undici before dispatch.
  'UND_ERR_INVALID_ARG',
  'UND_ERR_NOT_SUPPORTED',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);

/** `ERR_TLS_CERT_ALTNAME_INVALID`, `ERR_SSL_WRONG_VERSION_NUMBER`, `ERR_SSL_TLSV1_ALERT_…`. */
const TLS_HANDSHAKE_CODE = /^ERR_(TLS|SSL)_/;

const TIMEOUT_CODES: ReadonlySet<string> = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);

/** A short, secret-free name for an error: its `code`, else its class name. */
export function errorCode(err: unknown): string {
  if (err !== null && typeof err === 'object') {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code;
    // Happy-eyeballs connects (autoSelectFamily) fail with an AggregateError of per-address errors.
    const inner = (err as { errors?: unknown }).errors;
    if (Array.isArray(inner) && inner.length > 0) return errorCode(inner[0]);
    const name = (err as { name?: unknown }).name;
    if (typeof name === 'string' && name !== '' && name !== 'Error') return name;
  }
  return 'unknown_error';
}

export function isTimeoutCode(code: string): boolean {
  return TIMEOUT_CODES.has(code);
}

/** Classifies one failure; `requestStarted` is whether undici reached `onRequestStart`. */
export function classifyFailure(err: unknown, requestStarted: boolean): UpstreamFailure {
  const code = errorCode(err);
  // A certificate that does not verify (tls-verification.ts holds those codes) fails the
  // handshake, before any byte of the request.
  const beforeDispatch =
    PRE_DISPATCH_CODES.has(code) || isTlsVerificationFailure(code) || TLS_HANDSHAKE_CODE.test(code);
  return {
    kind: 'failure',
    dispatchState: !requestStarted && beforeDispatch ? 'not_sent' : 'sent_no_response',
    timedOut: isTimeoutCode(code),
    error: code,
  };
}
