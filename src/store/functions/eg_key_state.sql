-- The state an outcome moves its operation's key to, for the operation state it records: the one
-- map of it, for eg_record_outcome and eg_first_outcome. open: the destination asked for input
-- (awaiting_input, continued by eg_continue); accepted: the key stays reserved while the
-- destination does the work (migration 0015); unknown: held by the unknown-outcome rules.
create or replace function eg_key_state(p_operation_state text) returns text language sql immutable as $$
    select case p_operation_state when 'succeeded' then 'confirmed' when 'failed' then 'released'
      when 'open' then 'awaiting_input' when 'accepted' then 'accepted' else 'unknown' end
  $$;
