-- Crash recovery: attempts persisted without an outcome whose gate is gone. Candidates are read
-- first without locks, then each is handled in the global lock order (key, operation, attempt),
-- re-checking that it still has no outcome. One attempt.recovered event per attempt.
--
-- Orphaned: an attempt of a gate that stopped or whose heartbeat is older than staleAfterMs; one
-- of a previous life of the calling gate (same instance id, started before this life registered:
-- a restarted gate recovers at once, not after the stale window); any attempt when the caller is
-- exclusive (embedded store: the directory lock proves no other gate runs); and any attempt long
-- past its dispatch deadline. Never one of the calling gate's current life. The rule that follows is the one recorded on the operation
-- (0003), else the caller's `rules`, else hold.
create or replace function eg_recover(p_input text) returns json language plpgsql as $$
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
  v_my_start timestamptz;
begin
  select started_at into v_my_start from gate_instances where id = v_me;
  for v_candidate in
    select a.id, a.operation_id, o.key_hash from attempts a
      join operations o on o.id = a.operation_id
      left join gate_instances g on g.id = a.gate_instance
    where a.dispatch_state is null
      -- Never this life's own attempts: this gate is running them (or its outbox holds their outcome).
      and not (v_me is not null and a.gate_instance is not distinct from v_me
        and (v_my_start is null or a.started_at >= v_my_start))
      and (v_exclusive
        or (v_me is not null and a.gate_instance is not distinct from v_me)
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
    v_rule := coalesce(v_op.unknown_rule, p -> 'rules' ->> v_op.tool_id, 'hold');
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
      'approvalId', v_approval_id, 'rule', v_rule);
  end loop;
  return v_out::json;
end $$;
