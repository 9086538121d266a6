-- Operation p_op is now in state p_to: its row, and its key's row while the key still names it
-- (dedupe_keys.operation_state, migration 0021: what a duplicate reads instead of the operation's
-- row). Every change of an operation's state goes through here, except where the function that
-- makes it writes the key row in the same statement anyway: the key's moves to a new attempt
-- (eg_decide's upsert, eg_continue, eg_unknown, eg_supersede_waiting: the operation is open, and
-- eg_retry reopens it) and eg_record_outcome, the hot outcome, which writes the key once.
--
-- The key first, then the operation: the global lock order (README.md). A key that moved to
-- another operation is not touched (no row matches, so none is locked).
create or replace function eg_set_operation_state(p_op text, p_to text) returns void language plpgsql as $$
begin
  update dedupe_keys set operation_state = p_to
  where key_hash = (select key_hash from operations where id = p_op) and operation_id = p_op
    and operation_state is distinct from p_to;
  update operations set state = p_to, updated_at = now() where id = p_op;
end $$;
