import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0002: unknown outcomes (docs/design.md §3 "Attempt lineage"): the columns and tables for retry
 * lineage with a recorded retry decision, forks of a materially changed request into a new
 * operation, observations (reconciliation lookups, gate restarts), approval cards, gate instances
 * (crash recovery) and the store's settings (its authority key; the functions step records the
 * checksum of the applied functions there too).
 *
 * Schema only: the functions that use these tables (eg_unknown, eg_recover, eg_approval, and the
 * new definitions of eg_decide and eg_record_outcome) are in src/store/functions/.
 *
 * Never edit once applied (migrations.lock.json holds its checksum): add a new migration.
 */

const TABLES: readonly string[] = [
  'alter table operations add column supersedes_operation_id text',
  `alter table attempts add column retry_decision text check (retry_decision in
    ('previous_attempt_failed', 'reservation_expired', 'destination_idempotency_honored', 'operator_approved'))`,
  'alter table attempts add column remaining_attempts int',
  'alter table attempts add column gate_instance text',
  'alter table attempts add column deadline_at timestamptz',
  'alter table attempts add column recovered_at timestamptz',
  // Recovery scans only attempts without an outcome: a partial index keeps that set tiny.
  'create index attempts_open_idx on attempts (started_at) where dispatch_state is null',
  `create table observations (
    id text primary key,
    operation_id text not null references operations (id),
    attempt_id text,
    kind text not null check (kind in ('reconciliation', 'gate_restarted')),
    result text not null,
    facts jsonb not null,
    decision_id text,
    created_at timestamptz not null default now()
  )`,
  'create index observations_operation_idx on observations (operation_id, created_at)',
  // A projection for operators; the events are the evidence. 'expired' is not stored: an approved
  // card whose expires_at passed reads as expired.
  `create table approvals (
    id text primary key,
    operation_id text not null references operations (id),
    state text not null check (state in ('requested', 'approved', 'denied', 'revoked', 'used', 'withdrawn')),
    intent jsonb not null,
    previous_attempt_id text,
    previous_dispatch_state text,
    previous_status int,
    planned_recovery text not null,
    requested_at timestamptz not null default now(),
    requested_by text not null,
    decided_by text,
    decided_at timestamptz,
    reason text,
    expires_at timestamptz,
    revoked_by text,
    revoked_at timestamptz,
    used_by_attempt_id text,
    used_at timestamptz
  )`,
  // At most one open request per operation, whatever the number of concurrent holds.
  `create unique index approvals_one_open_idx on approvals (operation_id) where state = 'requested'`,
  'create index approvals_operation_idx on approvals (operation_id, requested_at)',
  'create index approvals_state_idx on approvals (state, requested_at desc)',
  `create table gate_instances (
    id text primary key,
    started_at timestamptz not null default now(),
    heartbeat_at timestamptz not null default now(),
    stopped_at timestamptz
  )`,
  `create table settings (
    name text primary key,
    value text not null
  )`,
  // gen_random_uuid() draws from the server's strong random source: 244 random bits.
  `insert into settings (name, value)
    values ('authority_key', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''))`,
];

export const migration0002: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of TABLES) {
      await sql.raw(statement).execute(db);
    }
  },
};
