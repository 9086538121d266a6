-- The open approval request of an operation for one request (p_fingerprint: the request a person
-- is asked about; migration 0011), created when there is none. Returns (id, created). A request
-- whose fingerprint differs from the lost attempt's is a change, and its card says so with both
-- fingerprints: approving it approves that request, never another with the same key values.
create or replace function eg_request_approval(p_op_id text, p_prev attempts, p_requested_by text, p_fingerprint text,
    out o_id text, out o_created boolean) language plpgsql as $$
  declare
    v_op operations%rowtype;
    v_changed boolean := p_prev.id is not null and p_fingerprint is distinct from (p_prev.request ->> 'fingerprint');
  begin
    select id into o_id from approvals
      where operation_id = p_op_id and request_fingerprint = p_fingerprint and state = 'requested';
    o_created := false;
    if found then return; end if;
    select * into v_op from operations where id = p_op_id;
    insert into approvals (id, operation_id, state, intent, previous_attempt_id, previous_dispatch_state,
      previous_status, planned_recovery, requested_by, request_fingerprint)
    values (gen_random_uuid()::text, p_op_id, 'requested', jsonb_build_object(
        'toolId', v_op.tool_id,
        'scope', jsonb_build_object('tenant', v_op.tenant, 'area', v_op.area, 'agent', v_op.agent),
        'keyValues', v_op.key_values, 'method', p_prev.request ->> 'method', 'host', p_prev.request ->> 'host',
        'path', p_prev.request ->> 'path', 'route', p_prev.request ->> 'route',
        'fingerprint', p_prev.request ->> 'fingerprint', 'idempotencyHeader', v_op.idempotency_header,
        'idempotencyKey', coalesce(p_prev.idempotency_key, case when v_op.idempotency_header is not null then v_op.id end)),
      p_prev.id, p_prev.dispatch_state, p_prev.status, eg_planned_recovery(v_op, p_prev) || case when v_changed
        then format(' The request that asked for this approval CHANGED (fingerprint %s; the attempt whose outcome is unknown had %s): same key values, another request. Approving lets this changed request go, and only it, as a new operation, with its own idempotency key, that supersedes this one, which stays unknown.',
          p_fingerprint, coalesce(p_prev.request ->> 'fingerprint', 'none'))
        else '' end, p_requested_by, p_fingerprint)
    on conflict do nothing
    returning id into o_id;
    if o_id is not null then
      o_created := true;
    else
      -- A concurrent hold of the same request created it first (the unique partial index): use it.
      select id into o_id from approvals
        where operation_id = p_op_id and request_fingerprint = p_fingerprint and state = 'requested';
    end if;
  end $$;
