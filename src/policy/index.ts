// The policy stage's public surface: other stages import only from here.
export { canonicalHost, isIpLiteral } from './canonical-host.js';
export { Classifier } from './classifier.js';
export { parseDuration } from './duration.js';
export { compileJsonPath } from './json-path.js';
export type { LenientMatch } from './lenient-match.js';
export { loadPolicies } from './load-policies.js';
export { type PolicyFileText, parsePolicyFiles } from './parse-policy-files.js';
export type * from './types.js';
