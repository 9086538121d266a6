-- Whether some attempt of p_operation_id numbered below p_number may have been sent: one with no
-- outcome yet, or with any outcome but not_sent. The unknown-outcome rule of eg_record_outcome
-- asks it twice: before it keeps a retry's definite failure unknown, and when an earlier
-- attempt's late not_sent may have been the last evidence it waited for.
create or replace function eg_maybe_sent_before(p_operation_id text, p_number int) returns boolean
language sql stable as $$
    select exists (select 1 from attempts e where e.operation_id = p_operation_id and e.number < p_number
      and e.dispatch_state is distinct from 'not_sent')
  $$;
