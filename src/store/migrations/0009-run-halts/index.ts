import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0009: the loop breaker counts per run AND key, and a halted run can be released (docs/design.md
 * §2: a model that keeps proposing the same duplicate is stopped after repeated skips). Before this, a run's duplicates added up across keys, and a
 * proxy whose clients shared one run halted them all after three duplicates from anyone, until a
 * restart.
 *
 * - run_key_skips: how many times a run proposed one key's effect while it was already done, and
 *   by which operation (a later operation of the key, past the window, counts from one again). The
 *   run halts when it proposes that done effect again after max_duplicate_skips skips.
 * - runs.halted_at / halt_decision_id / halted_key_hash: the halt, set by eg_decide, read by every
 *   decide of the run (the same row probe as before). NULL: the run is not halted.
 * - runs.releases: how many times an operator released it; a halt raced by a release is dropped
 *   (eg_decide compares it).
 * - runs.client: for a run the gate derived (no Effectgate-Run), the gate's instance id and the
 *   client address it was derived from. A halted derived run halts the same client's later derived
 *   runs on that gate (after an idle bound, a restart) until it is released; NULL for a run the
 *   client or the operator named.
 * - run_releases: who released a halted run, when and why, and which halt it ended. Never deleted.
 *
 * Runs halted under the old total count before this migration are not halted after it (the new
 * columns start empty): their old count mixed distinct keys, which is exactly what this changes.
 *
 * Schema only; the functions are in src/store/functions/ (eg_decide.sql, eg_skip.sql,
 * eg_release_run.sql). Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  `create table run_key_skips (
    tenant text not null,
    area text not null,
    agent text not null,
    run_id text not null,
    key_hash text not null,
    operation_id text not null,
    skips int not null,
    primary key (tenant, area, agent, run_id, key_hash)
  )`,
  'alter table runs add column halted_at timestamptz',
  'alter table runs add column halt_decision_id text',
  'alter table runs add column halted_key_hash text',
  'alter table runs add column releases int not null default 0',
  'alter table runs add column client text',
  // eg_decide step (a), for every derived run's proposal: is this client halted? Only halted rows.
  'create index runs_client_halted_idx on runs (tenant, area, agent, client) where halted_at is not null and client is not null',
  `create table run_releases (
    id text primary key,
    tenant text not null,
    area text not null,
    agent text not null,
    run_id text not null,
    halt_decision_id text,
    halted_at timestamptz,
    released_by text not null,
    reason text not null,
    released_at timestamptz not null default now()
  )`,
  'create index run_releases_run_idx on run_releases (tenant, area, agent, run_id, released_at)',
  // The runs list (`effectgate runs`, /api/runs) shows halted runs first, newest halt first.
  'create index runs_halted_idx on runs (halted_at desc) where halted_at is not null',
];

export const migration0009: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
