/**
 * The store stage: kysely over PostgreSQL (pg) or embedded PGlite, the reservation protocol in
 * SQL, and the hash-chained event log with its offline verifier.
 */

export {
  type AuditReport,
  type BadEvent,
  chainOf,
  computeEventHash,
  EVENT_CHAINS,
  GENESIS_HASH,
  verifyChain,
} from './audit-chain.js';
export * from './audit-export.js';
export { archiveAndPrune, type RetentionResult } from './audit-retention.js';
export {
  keyFileBesideStore,
  readKeyFile,
  type StoreKeyFile,
  storeKeysDir,
  writeNewKeyFile,
} from './key-file-beside-store.js';
export {
  DEFAULT_STORE_URL,
  embeddedStoreDir,
  type OpenStoreOptions,
  openInspectionStore,
  openStore,
  resolveStoreUrl,
} from './open-store.js';
export { storeEvents, verifyStoreChain } from './store-events.js';
export {
  connectStoreSocket,
  STORE_SOCKET,
  type StoreSocketServer,
  serveStoreSocket,
} from './store-socket.js';
export {
  isTransientSqlstate,
  isTransientStoreFailure,
  type SqlstateRule,
  STORE_SQLSTATES,
  sqlstateOf,
  sqlstateRule,
} from './store-sqlstates.js';
export type * from './types.js';
export { uuidv7 } from './uuidv7.js';
export {
  APPROVAL_STATES,
  ENFORCED_VERDICTS,
  GATE_MODES,
  OBSERVATION_KINDS,
  OPERATION_STATES,
  POSTED_OBSERVATION_KINDS,
  RETRY_REASONS,
  SETTLED_STATES,
  SHADOW_VERDICTS,
  VERDICTS,
} from './vocabulary.js';
