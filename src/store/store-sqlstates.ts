import { EffectgateError, type ErrorCode, StoreError } from '../errors.js';

/*
 * Every decision the gate takes on an SQLSTATE is here: which refusals are transient (the outcome
 * outbox, a decide that could not be made), which ones group commit may send again, and which of
 * the store functions' own refusals are which typed error. Nothing else in src/ reads an error's
 * SQLSTATE (test/unit/store/store-sqlstates.test.ts holds the source to that).
 */

/** What a refusal with one SQLSTATE means for a write the gate still has to make. */
export interface SqlstateRule {
  /**
   * True: the store could not take the write now and did not apply it (or applied it and the
   * answer was lost); the same write, sent again later, can land. False: the store answered about
   * the write itself, and sending it again gets the same refusal.
   */
  readonly transient: boolean;
  readonly why: string;
}

/**
 * Every SQLSTATE the store's code and its SQL functions raise or provoke, and the classes the
 * server raises whatever the store does, classified on purpose (test/unit/store/store-sqlstates
 * holds this table to the SQLSTATEs src/store mentions). A key of 5 characters is one code, of 2
 * a class (PostgreSQL appendix A, "PostgreSQL Error Codes"); a code takes its own entry, else its
 * class's, else it is not transient (the data's fault). Over-classifying is not free: the outcome
 * outbox keeps a transient write and stops its pass at it, so a write that can never land would
 * hold the ones behind it until the gate stops.
 */
export const STORE_SQLSTATES: Readonly<Record<string, SqlstateRule>> = Object.freeze({
  '08': { transient: true, why: 'connection exception: the connection was refused, lost or never made' },
  '40': {
    transient: true,
    why: 'transaction rollback: the transaction lost to another one (serialization, deadlock) and was rolled back whole',
  },
  '40001': {
    transient: true,
    why: 'serialization_failure: rolled back because of a concurrent transaction (group-commit.ts sends it again)',
  },
  '40P01': {
    transient: true,
    why: 'deadlock_detected: PostgreSQL broke a deadlock by rolling this one back (eg_batch.sql, group-commit.ts)',
  },
  '40003': {
    transient: true,
    why: 'statement_completion_unknown: it may have committed; the hot functions are safe to call again',
  },
  '53': {
    transient: true,
    why: 'insufficient resources: too many connections, out of memory or disk space on the server',
  },
  '55P03': {
    transient: true,
    why: "lock_not_available: a lock wait outlasted the hot functions' lock_timeout (eg_decide.sql, eg_record_outcome.sql, eg_batch.sql), e.g. behind a migration's CREATE INDEX; rolled back",
  },
  '57': {
    transient: true,
    why: 'operator intervention: the statement was cancelled or the server is shutting down, restarting or not accepting connections yet',
  },
  '57014': {
    transient: true,
    why: 'query_canceled: statement_timeout or pg_cancel_backend; rolled back',
  },
  '57P01': { transient: true, why: 'admin_shutdown: the server is stopping (a restart, a failover)' },
  '57P02': { transient: true, why: 'crash_shutdown: the server is restarting after a crash' },
  '57P03': { transient: true, why: 'cannot_connect_now: the server is starting or in recovery' },
  '57P05': { transient: true, why: 'idle_session_timeout: the server closed an idle pooled connection' },
  '58': { transient: true, why: 'system error outside PostgreSQL (I/O)' },
  '25P03': {
    transient: true,
    why: 'idle_in_transaction_session_timeout: the server closed the session; a new connection can take the write',
  },
  '42501': {
    transient: false,
    why: 'insufficient_privilege: a migration refused (0001-initial, 0006-event-retention); the role, not the moment',
  },
  P0001: {
    transient: false,
    why: 'raise_exception: a store function refused its input (`raise exception` without its own code)',
  },
  EG400: { transient: false, why: "the store's own refusal: the input is not acceptable" },
  EG404: { transient: false, why: "the store's own refusal: no such record" },
  EG409: { transient: false, why: "the store's own refusal: the record is not in a state that allows it" },
  EG422: {
    transient: false,
    why: "the store's own refusal: the chain is not where the archive says (retention)",
  },
  EG425: {
    transient: true,
    why: "a batch's call needs the rows of an operation whose event the batch has queued and not appended (eg_project_operation.sql): the batch is rolled back and its calls sent one by one, where it lands",
  },
});

/** The rule for `code`: its own entry, else its class's; `undefined` when neither is listed. */
export function sqlstateRule(code: string): SqlstateRule | undefined {
  return STORE_SQLSTATES[code] ?? STORE_SQLSTATES[code.slice(0, 2)];
}

/** True when a refusal with this SQLSTATE is transient: the same write can land later. */
export function isTransientSqlstate(code: string): boolean {
  return sqlstateRule(code)?.transient ?? false;
}

/**
 * The SQLSTATE of a driver's error (pg and PGlite both put it in `code`), or null: an error without
 * one is no answer from the server (a cut connection, the driver's read timeout) or not the
 * driver's at all.
 */
export function sqlstateOf(err: unknown): string | null {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
}

/**
 * A failed store call (a StoreError, the driver's error its cause) that is worth making again: a
 * store outage (connection refused, reset, timeout, server shutting down) or a transient refusal
 * (a lock wait past lock_timeout, a deadlock victim). An error the database raised about the data
 * itself (PL/pgSQL `raise`, a constraint, bad input) is not; an error without an SQLSTATE is an
 * outage; an error that is not the store's is a bug, never made again.
 */
export function isTransientStoreFailure(err: unknown): boolean {
  if (!(err instanceof StoreError)) return false;
  const code = sqlstateOf(err.cause ?? err);
  return code === null || isTransientSqlstate(code);
}

/**
 * A deadlock (40P01) or serialization failure (40001): rolled back, and only because of another
 * transaction; the same statement sent again can win (group-commit.ts, a lone call).
 */
export function lostToAnother(err: unknown): boolean {
  const code = sqlstateOf(err);
  return code === '40P01' || code === '40001';
}

/** 55P03 lock_not_available: a lock wait outlasted the hot functions' lock_timeout. */
export function lockTimedOut(err: unknown): boolean {
  return sqlstateOf(err) === '55P03';
}

/**
 * SQLSTATE classes of an error the server raised while running the statement or at its COMMIT,
 * each of which rolled the implicit transaction back: data exception (22), integrity (23), invalid
 * transaction state (25), transaction rollback (40: deadlock, serialization), syntax or access (42),
 * object state (55: lock not available), plpgsql's own raise (P0) and the store's (EG), and a
 * cancelled statement (57014). Not class 08 (connection), 53/58/XX (the server itself) or 57P0x
 * (shutdown): those can reach the gate after a COMMIT, so the statement may have landed.
 */
export function rolledBack(err: unknown): boolean {
  const code = sqlstateOf(err);
  if (code === null) return false;
  // 40003 (statement completion unknown) is the one class-40 code that may follow a COMMIT: core
  // PostgreSQL never raises it, compatible servers do.
  if (code === '40003') return false;
  return /^(22|23|25|40|42|55|P0|EG)/.test(code) || code === '57014';
}

/** The store functions whose own refusals (`raise … using errcode = 'EG…'`) are typed errors. */
export type RefusingFunction =
  | 'eg_approval'
  | 'eg_grant'
  | 'eg_add_observation'
  | 'eg_release_run'
  | 'eg_prune_cut'
  | 'eg_prune';

/**
 * What each function's refusals mean. EG404 is EG_ERR_NOT_FOUND for every one of them; EG400 and
 * EG409 what the function says (its .sql file raises them); EG422 a chain that is not where the
 * archive says (retention). A refusal not listed stays the StoreError it was.
 */
export const FUNCTION_REFUSALS: Readonly<
  Record<RefusingFunction, Readonly<Partial<Record<'EG400' | 'EG409' | 'EG422', ErrorCode>>>>
> = Object.freeze({
  eg_approval: { EG409: 'EG_ERR_APPROVAL_STATE' },
  eg_grant: { EG400: 'EG_ERR_CONFIG_INVALID', EG409: 'EG_ERR_APPROVAL_STATE' },
  eg_add_observation: { EG409: 'EG_ERR_OPERATION_STATE' },
  eg_release_run: { EG400: 'EG_ERR_CONFIG_INVALID', EG409: 'EG_ERR_RUN_STATE' },
  eg_prune_cut: { EG422: 'EG_ERR_AUDIT_CHAIN_BROKEN' },
  eg_prune: { EG422: 'EG_ERR_AUDIT_CHAIN_BROKEN' },
});

/** `fn`'s refusal `err` as its typed error (FUNCTION_REFUSALS), or null when it is not one. */
export function functionRefusal(fn: RefusingFunction, err: unknown): EffectgateError | null {
  const state = sqlstateOf(err);
  const codes: Readonly<Record<string, ErrorCode | undefined>> = FUNCTION_REFUSALS[fn];
  const code = state === 'EG404' ? 'EG_ERR_NOT_FOUND' : state === null ? undefined : codes[state];
  if (code === undefined) return null;
  return new EffectgateError(code, err instanceof Error ? err.message : String(err), { cause: err });
}
