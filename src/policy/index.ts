// The policy stage's public surface: other stages import only from here.
export { canonicalHost, isIpLiteral } from './canonical-host.js';
export { Classifier } from './classifier.js';
export { parseDuration } from './duration.js';
export { compileEgress, DEFAULT_EGRESS, EGRESS_CLASS_RANGES } from './egress-policy.js';
export { formatIp, type IpAddress, IpRange, parseIp } from './ip-range.js';
export { compileJsonPath } from './json-path.js';
export type { LenientMatch } from './lenient-match.js';
export { loadPolicies } from './load-policies.js';
export { type PolicyFileText, parsePolicyFiles, policySources } from './parse-policy-files.js';
export type * from './types.js';
