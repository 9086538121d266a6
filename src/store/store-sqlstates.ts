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
});

/** The rule for `code`: its own entry, else its class's; `undefined` when neither is listed. */
export function sqlstateRule(code: string): SqlstateRule | undefined {
  return STORE_SQLSTATES[code] ?? STORE_SQLSTATES[code.slice(0, 2)];
}

/** True when a refusal with this SQLSTATE is transient: the same write can land later. */
export function isTransientSqlstate(code: string): boolean {
  return sqlstateRule(code)?.transient ?? false;
}
