-- Evidence settled the operation (an outcome, a reconciliation): an open request has nothing
-- left to approve. Returns how many were withdrawn.
create or replace function eg_withdraw_approvals(p_op_id text, p_state text) returns int language plpgsql as $$
  declare
    v_n int;
  begin
    update approvals set state = 'withdrawn', decided_at = now(), reason = 'operation settled: ' || p_state
    where operation_id = p_op_id and state = 'requested';
    get diagnostics v_n = row_count;
    return v_n;
  end $$;
