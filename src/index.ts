/**
 * effectgate: stops AI agents from doing the same external effect twice and keeps an honest,
 * hash-chained trail of every attempt. In-process entry point; see `effectgate/undici` for the
 * interceptor and the `effectgate` command for the forward proxy.
 */

export type {
  CreateGateOptions,
  GateHandler,
  GateLogger,
  GateMetrics,
  GateRequest,
  GateRequestHead,
  GateResponse,
  GateTracer,
  UpstreamRequest,
  UpstreamResult,
} from './engine/index.js';
export { createGate, Gate, noGateTracer, tracerFromEnv } from './engine/index.js';
export type { ErrorCode, PolicyIssue } from './errors.js';
export { EffectgateError, ERROR_CODES, PolicyError, StoreError } from './errors.js';
export type { PolicySet, Tool } from './policy/index.js';
export { loadPolicies } from './policy/index.js';
export type {
  ApprovalRecord,
  ChainedEvent,
  DecisionRecord,
  EventRecord,
  ObservationRecord,
  OperationRecord,
  Scope,
  Store,
  UnchainedEvent,
} from './store/index.js';
export { openStore, serveStoreSocket, verifyChain } from './store/index.js';
