-- Brings the facts a key row copies from other rows up to date, and returns how many rows it
-- changed: today each key's copy of its operation's state (dedupe_keys.operation_state, migration
-- 0021). Run by the functions step in the transaction that installs these definitions
-- (index.ts), after them, so it covers what an older version's functions wrote without the copy
-- while they were still live: between a migration's commit and this step's, the gates already
-- running kept serving with the old definitions. From this step's commit on, every call runs the
-- definitions that keep the copy (eg_set_operation_state.sql).
--
-- Only rows whose copy differs are written, so a store already in step changes nothing; the join
-- reads every key once, at an upgrade only. A key whose operation row is gone is left as it is.
create or replace function eg_sync_heads() returns int language plpgsql as $$
declare
  v_changed int;
begin
  update dedupe_keys k set operation_state = o.state from operations o
  where o.id = k.operation_id and k.operation_state is distinct from o.state;
  get diagnostics v_changed = row_count;
  return v_changed;
end $$;
