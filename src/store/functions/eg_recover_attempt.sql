-- Crash recovery, step 2 of 2 (see eg_recover): one orphaned attempt, in its own transaction and
-- in the global lock order (key, operation, attempt, then the chain head of its one
-- attempt.recovered event, last). Re-checks that it still has no outcome; null when it got one
-- meanwhile. The rule that follows is the one recorded on the operation (0003), else the caller's
-- `rules`, else hold.
create or replace function eg_recover_attempt(p_input text, p_attempt_id text) returns json language plpgsql as $$
declare
  p jsonb := p_input::jsonb;
  v_me text := p ->> 'instanceId';
  v_candidate record;
  v_att attempts%rowtype;
  v_op operations%rowtype;
  v_key_owned boolean;
  v_latest int;
  v_change json;
  v_obs_id text;
  v_approval record;
  v_approval_id text;
  v_rule text;
  v_error constant text := 'gate_restarted: the gate stopped before this attempt had an outcome';
begin
  select a.id, a.operation_id, o.key_hash into v_candidate from attempts a
    join operations o on o.id = a.operation_id where a.id = p_attempt_id;
  if not found then
    return null;
  end if;
  v_key_owned := false;
  if v_candidate.key_hash is not null then
    perform 1 from dedupe_keys where key_hash = v_candidate.key_hash for update;
  end if;
  -- Found by a reader that projected every chain (KyselyStore.recover); after the key's lock, what
  -- was committed since (eg_project_operation.sql).
  perform eg_project_operation(v_candidate.operation_id);
  select * into v_op from operations where id = v_candidate.operation_id for update;
  select * into v_att from attempts where id = v_candidate.id and dispatch_state is null for update;
  if not found then
    return null;
  end if;
  update attempts set dispatch_state = 'sent_no_response', recovered_at = now(), error = v_error
  where id = v_att.id;
  if v_candidate.key_hash is not null then
    update dedupe_keys set state = 'unknown', expires_at = null, lost_attempt_id = v_att.id
    where key_hash = v_candidate.key_hash and state = 'pending' and attempt_id = v_att.id;
    v_key_owned := found;
    -- A key that still names the attempt in another state (evidence settled the operation while
    -- the attempt had no outcome) keeps its state, and is marked all the same (migration 0022).
    if not v_key_owned then
      update dedupe_keys set lost_attempt_id = v_att.id
      where key_hash = v_candidate.key_hash and attempt_id = v_att.id;
    end if;
  end if;
  select max(number) into v_latest from attempts where operation_id = v_op.id;
  v_change := null;
  if v_att.number = v_latest and v_op.state in ('open', 'unknown') then
    if v_op.state <> 'unknown' then
      perform eg_set_operation_state(v_op.id, 'unknown');
      v_change := json_build_object('from', v_op.state, 'to', 'unknown');
    end if;
  end if;
  v_obs_id := gen_random_uuid()::text;
  insert into observations (id, operation_id, attempt_id, kind, result, facts)
  values (v_obs_id, v_op.id, v_att.id, 'gate_restarted', 'marked_unknown', jsonb_build_object(
    'gateInstance', v_att.gate_instance, 'recoveredBy', v_me, 'startedAt', eg_iso(v_att.started_at),
    'deadlineAt', eg_iso(v_att.deadline_at)));
  v_approval_id := null;
  v_rule := coalesce(v_op.unknown_rule, p -> 'rules' ->> v_op.tool_id, 'hold');
  if v_key_owned and v_rule = 'hold' then
    v_att.dispatch_state := 'sent_no_response';
    select * into v_approval from eg_request_approval(v_op.id, v_att, 'recovery:' || coalesce(v_me, 'cli'),
      v_att.request ->> 'fingerprint');
    v_approval_id := v_approval.o_id;
  end if;
  perform eg_append_event(v_op.id, 'attempt.recovered', v_op.id, '{"input":' || json_build_object(
      'attemptId', v_att.id, 'operationId', v_op.id, 'gateInstance', v_att.gate_instance, 'recoveredBy', v_me)::text ||
    ',"facts":' || json_build_object('observation', json_build_object('id', v_obs_id, 'kind', 'gate_restarted',
      'result', 'marked_unknown'), 'dispatchState', 'sent_no_response', 'recoveredAt', now(), 'error', v_error,
      'stateChange', v_change,
      'key', case when v_key_owned then json_build_object('state', 'unknown') end,
      'approvalId', v_approval_id)::text || '}');
  return json_build_object('operationId', v_op.id, 'attemptId', v_att.id, 'toolId', v_op.tool_id,
    'approvalId', v_approval_id, 'rule', v_rule);
end $$;
