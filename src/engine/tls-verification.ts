/**
 * What the gate says when the destination's TLS certificate does not verify (docs/design.md §4.3). The
 * handshake fails before any byte of the request is written, so nothing was sent and a repeat
 * cannot duplicate the effect; but a repeat fails the same way until the cause is fixed, so the
 * answer says why it is safe, that it will not help yet, and what does (most often the gate's
 * `--upstream-ca`, for a destination on a private or self-signed CA).
 */

interface TlsCause {
  readonly cause: string;
  readonly fix: string;
}

const WRONG_NAME: TlsCause = {
  cause: 'its certificate does not name this host',
  fix: 'the request uses a host name the certificate holds (--upstream-ca only adds trusted CAs; it does not change this)',
};

const UNTRUSTED: TlsCause = {
  cause: 'the gate does not trust its certificate (self-signed, or issued by a CA the gate does not know)',
  fix: "the gate trusts that CA: the gate's operator must start it with --upstream-ca FILE, a PEM bundle holding the destination's CA",
};

/**
 * OpenSSL verify codes (as Node reports them) and Node's own, by what fixes them. Each one fails
 * the handshake before the request is written: classify-failure.ts reads `not_sent` from here.
 */
const CAUSES: Readonly<Record<string, TlsCause>> = {
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: UNTRUSTED,
  UNABLE_TO_GET_ISSUER_CERT: UNTRUSTED,
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: UNTRUSTED,
  DEPTH_ZERO_SELF_SIGNED_CERT: UNTRUSTED,
  SELF_SIGNED_CERT_IN_CHAIN: UNTRUSTED,
  CERT_UNTRUSTED: UNTRUSTED,
  CERT_HAS_EXPIRED: {
    cause: 'its certificate has expired',
    fix: 'the destination renews its certificate (--upstream-ca cannot make an expired certificate valid)',
  },
  CERT_NOT_YET_VALID: {
    cause: 'its certificate is not valid yet',
    fix: "the destination's certificate is valid or the gate's clock is right (--upstream-ca does not change this)",
  },
  ERR_TLS_CERT_ALTNAME_INVALID: WRONG_NAME,
  HOSTNAME_MISMATCH: WRONG_NAME,
  CERT_REVOKED: {
    cause: 'its certificate is revoked',
    fix: 'the destination serves a valid certificate (--upstream-ca cannot help)',
  },
  CERT_SIGNATURE_FAILURE: {
    cause: 'its certificate signature does not verify',
    fix: "the destination serves a valid certificate (one from a private CA needs that CA in the gate's --upstream-ca)",
  },
};

/** Whether `code` (an `errorCode`) is the destination's certificate failing verification. */
export function isTlsVerificationFailure(code: string): boolean {
  return Object.hasOwn(CAUSES, code);
}

/**
 * The sentences for a certificate that did not verify, or `null` for any other error.
 * `repeatable: false` drops "safe to repeat" when an earlier attempt of the operation may have
 * done the effect (its outcome is unknown, whatever this attempt did).
 */
export function tlsVerificationAdvice(code: string, repeatable = true): string | null {
  const c = CAUSES[code];
  if (c === undefined) return null;
  const sent = repeatable
    ? 'No byte of the request was sent, so nothing reached the destination: repeating the call is safe, but it fails the same way'
    : 'No byte of this request was sent, and a repeat fails the same way';
  return `The TLS handshake with the destination failed: ${c.cause} (${code}). ${sent} until ${c.fix}.`;
}
