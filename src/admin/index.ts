export { fullCounts } from './admin-api.js';
export { ADMIN_TOKEN_ENV, type AdminAuthResult, checkAdminAuth, resolveAdminToken } from './admin-auth.js';
export { MAX_ADMIN_BODY_BYTES } from './admin-http.js';
export {
  APPROVAL_STATES,
  type ApprovalAction,
  DEFAULT_APPROVAL_TTL,
  DEFAULT_LIST_LIMIT,
  InputError,
  MAX_LIST_LIMIT,
  OPERATION_STATES,
  parseApprovalDecision,
  parseApprovalState,
  parseDecidedBy,
  parseDecisionReason,
  parseLimit,
  parseName,
  parseOperationFilter,
  parseOptionalScope,
  parsePositiveDuration,
} from './admin-input.js';
export {
  type AdminLogger,
  type AdminServer,
  type AdminServerOptions,
  createAdminServer,
} from './admin-server.js';
export { DEFAULT_GRANT_TTL, GRANT_FIELDS, parseGrant } from './grant-input.js';
export {
  createPrometheusMetrics,
  METRICS_PREFIX,
  type PolicyReloadResult,
  PrometheusMetrics,
  type PrometheusMetricsOptions,
} from './metrics.js';
export {
  parseObservation,
  parseResolution,
  payloadFingerprint,
} from './observation-input.js';
export { parseRunRelease, RUN_RELEASE_FIELDS } from './run-input.js';
export {
  type ApprovalEntry,
  type AttemptEntry,
  buildTrail,
  type DecisionEntry,
  idempotencySummary,
  loadOperationReport,
  type ObservationEntry,
  type OperationReport,
  responseSummary,
  shadowDispatchEntry,
  shadowSummary,
  type Trail,
  type TrailEntry,
  type TrailOperation,
} from './trail.js';
export { handleUi, parseKeyQuery, type UiContext } from './ui/index.js';
export { visibleText } from './visible-text.js';
