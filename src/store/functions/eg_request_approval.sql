-- The open approval request of an operation, created when there is none. Returns (id, created).
create or replace function eg_request_approval(p_op_id text, p_prev attempts, p_requested_by text, p_changed boolean,
    out o_id text, out o_created boolean) language plpgsql as $$
  declare
    v_op operations%rowtype;
  begin
    select id into o_id from approvals where operation_id = p_op_id and state = 'requested';
    o_created := false;
    if found then return; end if;
    select * into v_op from operations where id = p_op_id;
    insert into approvals (id, operation_id, state, intent, previous_attempt_id, previous_dispatch_state,
      previous_status, planned_recovery, requested_by)
    values (gen_random_uuid()::text, p_op_id, 'requested', jsonb_build_object(
        'toolId', v_op.tool_id,
        'scope', jsonb_build_object('tenant', v_op.tenant, 'area', v_op.area, 'agent', v_op.agent),
        'keyValues', v_op.key_values, 'method', p_prev.request ->> 'method', 'host', p_prev.request ->> 'host',
        'path', p_prev.request ->> 'path', 'route', p_prev.request ->> 'route',
        'fingerprint', p_prev.request ->> 'fingerprint', 'idempotencyHeader', v_op.idempotency_header),
      p_prev.id, p_prev.dispatch_state, p_prev.status, eg_planned_recovery(v_op, p_prev) || case when p_changed
        then ' The proposal that asked for this approval CHANGED the request (another fingerprint): approving lets the changed request go as a new operation, with its own idempotency key, that supersedes this one, which stays unknown.'
        else '' end, p_requested_by)
    on conflict do nothing
    returning id into o_id;
    if o_id is not null then
      o_created := true;
    else
      -- A concurrent hold created it first (the unique partial index): use that one.
      select id into o_id from approvals where operation_id = p_op_id and state = 'requested';
    end if;
  end $$;
