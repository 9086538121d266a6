export type * from './types.js';
export { canonicalJson, sha256Ref, hmacRef } from './canonical-json.js';
export { buildSemanticKey, type SemanticKey } from './semantic-key.js';
export { Gate, type GateOptions, type GateLogger } from './gate.js';
export { createGate, type CreateGateOptions } from './create-gate.js';
export { renderVerdict, negotiateProblemType, type VerdictFacts } from './verdict-response.js';
