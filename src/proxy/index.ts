export { type CaBundleOptions, type CaBundleResult, writeCaBundle } from './ca-bundle.js';
export {
  CA_CERT_FILE,
  CA_KEY_FILE,
  CertificateAuthority,
  type CertificateAuthorityOptions,
  type InitCaOptions,
  initCertificateAuthority,
  type LeafCertificate,
} from './certificate-authority.js';
export { type AuthResult, PROXY_AUTHENTICATE, ProxyAuthenticator } from './proxy-auth.js';
export type { ProxyCounter, ProxyCountersSnapshot } from './proxy-counters.js';
export { DEFAULT_PROXY_LIMITS, type ProxyLimits } from './proxy-limits.js';
export { createProxyServer, type ProxyServer, type ProxyServerOptions } from './proxy-server.js';
export {
  createUpstreamClient,
  DEFAULT_BODY_TIMEOUT_MS,
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_MAX_RESPONSE_BYTES,
  type StreamRequest,
  type UpstreamClient,
  type UpstreamClientOptions,
} from './upstream-client.js';
