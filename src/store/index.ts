/**
 * The store stage: kysely over PostgreSQL (pg) or embedded PGlite, the reservation protocol in
 * SQL, the hash-chained event log with its offline verifier, and the sealed log over it (signed
 * Merkle checkpoints).
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
export * from './audit-export-verify.js';
export {
  AUDIT_KEY_FILE,
  type AuditKey,
  chooseAuditKey,
  newAuditKeyName,
  readVerifierKey,
} from './audit-key.js';
export {
  type AuditLogStore,
  type SealProblem,
  type SealReport,
  verifySealedLog,
} from './audit-log-verify.js';
export { archiveAndPrune, type RetentionResult, type RetentionStore } from './audit-retention.js';
export {
  AuditSealer,
  type AuditSealerOptions,
  type SealerLogger,
  type SealerStore,
  type SealStep,
} from './audit-sealer.js';
export { type CheckpointNote, checkpointOrigin, readCheckpointNote } from './checkpoint-note.js';
export {
  EventProjector,
  type EventProjectorOptions,
  type ProjectorLogger,
  type ProjectorStore,
} from './event-projector.js';
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
export {
  generateNoteKey,
  type NoteSigner,
  type NoteVerifier,
  parseSignerKey,
  parseVerifierKey,
  SignedNoteError,
} from './signed-note.js';
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
export { checkWitnessed, type WitnessCheck } from './witness-check.js';
