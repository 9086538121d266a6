-- Approve, deny or revoke an approval card; one approval.<action> event on the operation's chain.
-- Errors meant for the caller have their own SQLSTATEs, which the store maps to typed errors:
-- EG404 (no such approval) and EG409 (the approval is not in a state the action applies to).
create or replace function eg_approval(p_input text) returns void language plpgsql as $$
declare
  p jsonb := p_input::jsonb;
  v_action text := p ->> 'action';
  v_op text;
  v_row approvals%rowtype;
  v_state text;
  v_to text;
begin
  select operation_id into v_op from approvals where id = p ->> 'approvalId';
  if not found then
    raise exception 'no approval %', p ->> 'approvalId' using errcode = 'EG404';
  end if;
  perform eg_project_operation(v_op);
  perform 1 from operations where id = v_op for update;
  select * into v_row from approvals where id = p ->> 'approvalId' for update;
  v_state := case when v_row.state = 'approved' and v_row.expires_at <= now() then 'expired' else v_row.state end;
  if v_action in ('approve', 'deny') and v_state <> 'requested' then
    raise exception 'approval % is %, only a requested approval can be %', v_row.id, v_state,
      case v_action when 'approve' then 'approved' else 'denied' end using errcode = 'EG409';
  end if;
  if v_action = 'revoke' and v_state <> 'approved' then
    raise exception 'approval % is %, only an approved, unused approval can be revoked', v_row.id, v_state
      using errcode = 'EG409';
  end if;
  if v_action = 'approve' then
    v_to := 'approved';
    update approvals set state = 'approved', decided_by = p ->> 'by', decided_at = now(), reason = p ->> 'reason',
      expires_at = now() + eg_ms(p -> 'ttlMs')
    where id = v_row.id;
  elsif v_action = 'deny' then
    v_to := 'denied';
    update approvals set state = 'denied', decided_by = p ->> 'by', decided_at = now(), reason = p ->> 'reason'
    where id = v_row.id;
  elsif v_action = 'revoke' then
    v_to := 'revoked';
    update approvals set state = 'revoked', revoked_by = p ->> 'by', revoked_at = now(), reason = p ->> 'reason'
    where id = v_row.id;
  else
    raise exception 'unknown approval action %', v_action;
  end if;
  perform eg_append_event(v_op, 'approval.' || v_to, v_op, '{"input":' || p_input || ',"facts":' ||
    json_build_object('approvalId', v_row.id, 'operationId', v_op, 'from', v_state, 'to', v_to,
      'expiresAt', case when v_action = 'approve' then eg_iso(now() + eg_ms(p -> 'ttlMs')) end)::text || '}');
end $$;
