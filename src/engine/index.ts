export {
  AUTHORITY_KEY_FILE,
  authorityKeyOf,
  EXPORT_AUTHORITY_KEY,
  MIN_AUTHORITY_KEY_LENGTH,
  resolveAuthorityKey,
} from './authority-key.js';
export type { GateBodyStream } from './body-stream.js';
export { type BufferedDispatchOptions, dispatchBuffered } from './buffered-dispatch.js';
export { canonicalJson, hmacRef, sha256Ref } from './canonical-json.js';
export { classifyFailure, errorCode, isTimeoutCode, type UpstreamFailure } from './classify-failure.js';
export { type CreateGateOptions, createGate } from './create-gate.js';
export { Gate, type GateLogger, type GateOptions, READ_BACK_FINGERPRINT_KEY } from './gate.js';
export {
  GATE_HEADER_PREFIX,
  isGateHeader,
  rawWithoutGateHeaders,
  withoutGateHeaders,
} from './gate-headers.js';
export type { CloseReport } from './gate-lifecycle.js';
export {
  type DeferredOutcomeEvent,
  type GateMetrics,
  noGateMetrics,
  type UpstreamOutcome,
} from './gate-metrics.js';
export { type GateSealOptions, startGateSealer } from './gate-sealer.js';
export {
  type DecisionTrace,
  type GateTracer,
  noGateTracer,
  type TracedAttempt,
} from './gate-tracing.js';
export type { GenerationState, ReloadReport } from './generation-switch.js';
export { connectionNamedHeaders, HOP_BY_HOP_HEADERS, stripHopByHop } from './hop-by-hop.js';
export { defaultInstanceId } from './instance-id.js';
export {
  formatAuthority,
  MAX_CONTEXT_VALUE_LENGTH,
  normalizeHead,
  normalizeHost,
  type RawRequestHead,
} from './normalize-head.js';
export type { GenerationInfo } from './policy-generation.js';
export {
  codedProblem,
  destinationRefusedResponse,
  problemResponse,
  type TransportProblemInit,
  upstreamFailedResponse,
} from './problem-response.js';
export { type ReconcileLookupInput, reconcileLookup } from './reconcile-lookup.js';
export { buildSemanticKey, conflateScalars, type SemanticKey } from './semantic-key.js';
export { isTlsVerificationFailure, tlsVerificationAdvice } from './tls-verification.js';
export {
  type BatchSetting,
  type SamplerSetting,
  type TracingSettings,
  tracerFromEnv,
  tracingFromEnv,
} from './tracer-from-env.js';
export type * from './types.js';
export { unknownRuleOf, unknownRules } from './unknown-rule.js';
export { negotiateProblemType, renderVerdict, type VerdictFacts } from './verdict-response.js';
