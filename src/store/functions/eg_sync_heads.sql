-- Brings the facts a key row copies from other rows up to date, and returns how many rows it
-- changed: each key's copy of its operation's state (dedupe_keys.operation_state, migration 0021),
-- and whether its attempt was marked lost by an expiry or a recovery (dedupe_keys.lost_attempt_id,
-- migration 0022; the attempt's recovered_at says so). Run by the functions step in the
-- transaction that installs these definitions (index.ts), after them, so it covers what an older
-- version's functions wrote without the copies while they were still live: between a
-- migration's commit and this step's, the gates already running kept serving with the old
-- definitions. From this step's commit on, every call runs the
-- definitions that keep them (eg_set_operation_state.sql; eg_expire.sql and eg_recover_attempt.sql).
--
-- Only rows whose copy differs are written, so a store already in step changes nothing; the join
-- reads every key once, at an upgrade only. A key whose operation row is gone is left as it is.
create or replace function eg_sync_heads() returns int language plpgsql as $$
declare
  v_changed int;
  v_count int;
begin
  -- The rows copied from are brought up to date first: the hot path does not write them.
  perform eg_project_operation(null);
  update dedupe_keys k set operation_state = o.state from operations o
  where o.id = k.operation_id and k.operation_state is distinct from o.state;
  get diagnostics v_changed = row_count;
  update dedupe_keys k set lost_attempt_id = a.id from attempts a
  where a.id = k.attempt_id and a.recovered_at is not null and k.lost_attempt_id is distinct from a.id;
  get diagnostics v_count = row_count;
  return v_changed + v_count;
end $$;
