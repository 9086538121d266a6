-- Evidence settled the operation (an outcome, a reconciliation) or took it out of unknown (a late
-- answer showed the tool did not run): an open request has nothing left to approve, and an
-- approval not used yet approved a retry of an attempt whose outcome is now known, so it may not
-- let a later, unreviewed attempt go. Returns how many were withdrawn.
create or replace function eg_withdraw_approvals(p_op_id text, p_state text) returns int language plpgsql as $$
  declare
    v_n int;
  begin
    update approvals set state = 'withdrawn', decided_at = now(), reason = 'operation settled: ' || p_state
    where operation_id = p_op_id and state in ('requested', 'approved');
    get diagnostics v_n = row_count;
    return v_n;
  end $$;
