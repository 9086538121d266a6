/*
 * Part of migration 0002 (see 0002-unknown-outcomes.ts for the event shapes and lock order):
 * crash recovery and approval decisions, kept apart from the reservation protocol they serve.
 * Never edit once released; a change is a new migration.
 */

/*
 * Crash recovery: attempts persisted without an outcome whose gate is gone. Candidates are read
 * first without locks, then each is handled in the global lock order (key, operation, attempt),
 * re-checking that it still has no outcome. One attempt.recovered event per attempt.
 */
export const RECOVER = `create function eg_recover(p_input text) returns json language plpgsql as $$
declare
  p jsonb := p_input::jsonb;
  v_me text := p ->> 'instanceId';
  v_exclusive boolean := coalesce((p ->> 'exclusive')::boolean, false);
  v_stale interval := eg_ms(p -> 'staleAfterMs');
  v_candidate record;
  v_att attempts%rowtype;
  v_op operations%rowtype;
  v_key_owned boolean;
  v_latest int;
  v_change json;
  v_obs_id text;
  v_approval record;
  v_approval_id text;
  v_out jsonb := '[]'::jsonb;
  v_rule text;
begin
  for v_candidate in
    select a.id, a.operation_id, o.key_hash from attempts a
      join operations o on o.id = a.operation_id
      left join gate_instances g on g.id = a.gate_instance
    where a.dispatch_state is null
      and (v_me is null or a.gate_instance is distinct from v_me)
      and (v_exclusive
        or (g.id is not null and (g.stopped_at is not null or g.heartbeat_at < now() - v_stale))
        or coalesce(a.deadline_at, a.started_at + interval '10 minutes') < now() - v_stale)
    order by a.started_at
  loop
    v_key_owned := false;
    if v_candidate.key_hash is not null then
      perform 1 from dedupe_keys where key_hash = v_candidate.key_hash for update;
    end if;
    select * into v_op from operations where id = v_candidate.operation_id for update;
    select * into v_att from attempts where id = v_candidate.id and dispatch_state is null for update;
    continue when not found;
    update attempts set dispatch_state = 'sent_no_response', recovered_at = now(),
      error = 'gate_restarted: the gate stopped before this attempt had an outcome'
    where id = v_att.id;
    if v_candidate.key_hash is not null then
      update dedupe_keys set state = 'unknown', expires_at = null
      where key_hash = v_candidate.key_hash and state = 'pending' and attempt_id = v_att.id;
      v_key_owned := found;
    end if;
    select max(number) into v_latest from attempts where operation_id = v_op.id;
    v_change := null;
    if v_att.number = v_latest and v_op.state in ('open', 'unknown') then
      if v_op.state <> 'unknown' then
        update operations set state = 'unknown', updated_at = now() where id = v_op.id;
        v_change := json_build_object('from', v_op.state, 'to', 'unknown');
      end if;
    end if;
    v_obs_id := gen_random_uuid()::text;
    insert into observations (id, operation_id, attempt_id, kind, result, facts)
    values (v_obs_id, v_op.id, v_att.id, 'gate_restarted', 'marked_unknown', jsonb_build_object(
      'gateInstance', v_att.gate_instance, 'recoveredBy', v_me, 'startedAt', eg_iso(v_att.started_at),
      'deadlineAt', eg_iso(v_att.deadline_at)));
    v_approval_id := null;
    v_rule := coalesce(p -> 'rules' ->> v_op.tool_id, 'hold');
    if v_key_owned and v_rule = 'hold' then
      v_att.dispatch_state := 'sent_no_response';
      select * into v_approval from eg_request_approval(v_op.id, v_att, 'recovery:' || coalesce(v_me, 'cli'), false);
      v_approval_id := v_approval.o_id;
    end if;
    perform eg_append_event(v_op.id, 'attempt.recovered', v_op.id, '{"input":' || json_build_object(
        'attemptId', v_att.id, 'operationId', v_op.id, 'gateInstance', v_att.gate_instance, 'recoveredBy', v_me)::text ||
      ',"facts":' || json_build_object('observation', json_build_object('id', v_obs_id, 'kind', 'gate_restarted',
        'result', 'marked_unknown'), 'dispatchState', 'sent_no_response', 'stateChange', v_change,
        'key', case when v_key_owned then json_build_object('state', 'unknown') end,
        'approvalId', v_approval_id)::text || '}');
    v_out := v_out || jsonb_build_object('operationId', v_op.id, 'attemptId', v_att.id, 'toolId', v_op.tool_id,
      'approvalId', v_approval_id);
  end loop;
  return v_out::json;
end $$`;

/* Approve, deny or revoke an approval card; one approval.<action> event on the operation's chain. */
export const APPROVAL = `create function eg_approval(p_input text) returns void language plpgsql as $$
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
end $$`;
