import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0018: the sealed trail. A sealer (src/store/audit-sealer.ts, off the hot path) folds the events
 * the chains have committed into one RFC 9162 Merkle tree and writes a signed checkpoint of it
 * here; `effectgate audit verify` checks every checkpoint against the events, and a witness who
 * kept one (`effectgate audit checkpoint`) can later check that the store still holds it.
 *
 * - audit_checkpoints: one row per checkpoint, by tree size. `heads` is the last sealed seq of
 *   every chain that has one ({"<chain>": seq}); the leaves added by a checkpoint are the events
 *   after the previous checkpoint's heads up to its own, in (chain, seq) order. `frontier` is the
 *   tree's compact range at that size (MerkleFrontier JSON), so verification can resume after
 *   retention removed earlier leaves; `note` is the C2SP signed note of the checkpoint. The first
 *   row of a log has size 0 and the chains' bases as its heads: where the sealed log starts.
 * - Append-only, like events: every UPDATE, DELETE and TRUNCATE is refused by a trigger.
 * - settings.audit_log_id: the log's identity, in every checkpoint's origin line, so a witness's
 *   checkpoint of one store is never taken for another's.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  `create table audit_checkpoints (
    size bigint primary key check (size >= 0),
    heads jsonb not null,
    root text not null,
    frontier text not null,
    sealed_at timestamptz not null,
    note text not null
  )`,
  `create function eg_audit_checkpoints_append_only() returns trigger language plpgsql as $$
  begin
    raise exception 'effectgate: the audit_checkpoints table is append-only (% refused)', tg_op
      using errcode = 'insufficient_privilege';
  end $$`,
  `create trigger audit_checkpoints_no_update_delete before update or delete on audit_checkpoints
    for each row execute function eg_audit_checkpoints_append_only()`,
  `create trigger audit_checkpoints_no_truncate before truncate on audit_checkpoints
    for each statement execute function eg_audit_checkpoints_append_only()`,
  `insert into settings (name, value) values ('audit_log_id', gen_random_uuid()::text)`,
];

export const migration0018: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
