// The policy stage's public surface: other stages import only from here.

export { suggestField } from '../config/index.js';
export { canonicalHost, isIpLiteral } from './canonical-host.js';
export { Classifier } from './classifier.js';
export { parseDuration } from './duration.js';
export { compileEgress, DEFAULT_EGRESS, EGRESS_CLASS_RANGES } from './egress-policy.js';
export { foldName } from './fold-name.js';
export { formatIp, type IpAddress, IpRange, parseIp } from './ip-range.js';
export { compileJsonPath } from './json-path.js';
export type { LenientMatch } from './lenient-match.js';
export { loadPolicies } from './load-policies.js';
export { loadToolsList, MAX_TOOLS_LIST_BYTES } from './load-tools-list.js';
export {
  type PolicyFileText,
  parsePolicyFiles,
  policyExamples,
  policySources,
} from './parse-policy-files.js';
export {
  EXPECTED_VERDICTS,
  type ExampleExpectation,
  type ExampleRequest,
  type ExampleResponse,
  type ExpectedVerdict,
  type PolicyExample,
} from './policy-examples.js';
export { POLICY_FIELDS } from './policy-fields.js';
export {
  type AnnotationReport,
  type AnnotationWarning,
  type AnnotationWarningReason,
  annotationWarnings,
  type McpEndpoint,
  mcpEndpoint,
  toolsCallBody,
} from './tool-annotations.js';
export {
  MCP_DEFAULT_HINTS,
  type McpHintName,
  type McpToolDescription,
  type McpToolHints,
  parseToolsList,
  type ToolsList,
} from './tools-list.js';
export type * from './types.js';
