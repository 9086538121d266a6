import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0008: session grants (docs/design.md §3: the authority to make a group
 * of calls is recorded with the process's identity, the time of approval and the time of
 * revocation, apart from the outcome of the action). A grant lets one run of one scope retry
 * unknown operations (of one tool, or of every tool) for a period without a per-call approval, for
 * a batch recovery. Who was allowed to try is recorded here; what happened stays in the attempts.
 *
 * - grants: one row per grant; revoked_at ends it early. Never deleted.
 * - approvals.grant_id: the card of each retry made under a grant names it (the card is `used`,
 *   decided by the grant's author).
 *
 * Schema only; the functions are in src/store/functions/ (eg_grant.sql, eg_unknown.sql). Never
 * edit once applied.
 */

const STATEMENTS: readonly string[] = [
  `create table grants (
    id text primary key,
    tenant text not null,
    area text not null,
    agent text not null,
    run_id text not null,
    tool_id text,
    granted_by text not null,
    reason text not null,
    granted_at timestamptz not null default now(),
    expires_at timestamptz not null,
    revoked_by text,
    revoked_at timestamptz,
    revoke_reason text
  )`,
  // eg_unknown looks a run's grants up when it would otherwise hold: by scope and run.
  'create index grants_run_idx on grants (tenant, area, agent, run_id, granted_at)',
  'create index grants_granted_idx on grants (granted_at desc)',
  'alter table approvals add column grant_id text references grants (id)',
];

export const migration0008: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
