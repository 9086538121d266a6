-- Delegation (docs/design.md §3 "Delegation": one owner per operation): a
-- proposal carrying Effectgate-Operation says it acts on that operation's declared effect, as a
-- worker of the process that owns it. Called by eg_decide before anything else is read; returns
-- the verdict when the claim settles the proposal, or null to go on with the usual protocol, which
-- then makes it an attempt of THAT operation (its key is that operation's, the request is the same),
-- never a new one: pending while another attempt (the owner's, another worker's) is in flight,
-- hold or reconcile while the outcome is unknown, a retry after a definite failure, a duplicate
-- once it succeeded.
--
-- Refused (block, 422 at the gate, recorded like any decision) when the claim cannot be an attempt
-- of that operation: no operation of this scope has that id (another scope's is not told apart
-- from none), it is another tool's, its tool keeps no duplicate key (no reservation can hold one
-- owner), the request differs from the operation's (other key values, or a materially changed
-- request: the usual protocol would fork a new operation), the operation no longer holds its key
-- (a later operation does), or its window is over (the usual protocol would start a new one).
-- An operation that already succeeded is answered as a duplicate of it whatever its window says:
-- the worker means to do that very effect again.
create or replace function eg_delegated(p jsonb, p_input text) returns json language plpgsql as $$
declare
  v_claim text := p ->> 'claimedOperationId';
  v_scope jsonb := p -> 'scope';
  v_window interval := eg_ms(p -> 'key' -> 'windowMs');
  v_op operations%rowtype;
  v_key dedupe_keys%rowtype;
  v_last attempts%rowtype;
  v_reason text;
  v_source json;
  v_skips int;
begin
  -- The claimed operation's rows: the proposal's key locked first (a valid claim is of that key's
  -- operation), then its chain brought up to date (eg_project_operation.sql).
  perform 1 from dedupe_keys where key_hash = p -> 'key' ->> 'hash' for update;
  perform eg_project_operation(v_claim);
  select * into v_op from operations where id = v_claim;
  if not found or v_op.tenant is distinct from v_scope ->> 'tenant' or v_op.area is distinct from v_scope ->> 'area'
      or v_op.agent is distinct from v_scope ->> 'agent' then
    v_reason := format('delegation_unknown_operation: Effectgate-Operation %s names no operation of this scope', v_claim);
    v_op := null;
  elsif v_op.tool_id is distinct from p ->> 'toolId' then
    v_reason := format('delegation_other_tool: operation %s is of tool %s, not %s', v_op.id, v_op.tool_id, p ->> 'toolId');
  elsif v_op.key_hash is null or jsonb_typeof(p -> 'key') is distinct from 'object' then
    v_reason := format('delegation_without_key: tool %s keeps no duplicate key, so the gate cannot hold one owner of operation %s',
      v_op.tool_id, v_op.id);
  elsif v_op.key_hash is distinct from p -> 'key' ->> 'hash' then
    v_reason := format('delegation_request_changed: the request''s key values differ from operation %s''s', v_op.id);
  else
    select * into v_last from attempts where operation_id = v_op.id order by number desc limit 1;
    if (v_last.request ->> 'fingerprint') is distinct from (p -> 'request' ->> 'fingerprint') then
      v_reason := format('delegation_request_changed: the request differs materially from operation %s''s (fingerprint %s, not %s)',
        v_op.id, p -> 'request' ->> 'fingerprint', v_last.request ->> 'fingerprint');
    end if;
  end if;

  if v_reason is null then
    select * into v_key from dedupe_keys where key_hash = v_op.key_hash;
    if v_op.state in ('succeeded', 'duplicate_effect_confirmed') and not (v_key.operation_id = v_op.id
        and v_key.state = 'confirmed' and (v_key.window_ends_at is null or v_key.window_ends_at >= now())) then
      -- Done, and its key no longer says so (the window ended, or a later operation took it).
      v_skips := eg_skip(p, v_op.key_hash, v_op.id);
      if v_key.operation_id = v_op.id and v_key.state = 'confirmed' then
        v_source := json_build_object('runId', v_key.run_id, 'step', v_key.step, 'operationId', v_op.id,
          'attemptId', v_key.attempt_id, 'confirmedAt', eg_iso(v_key.confirmed_at), 'destinationRef', v_key.destination_ref);
      else
        -- The key went on to a later operation: the reference is the one evidence settled it with
        -- (an operator's, a callback's), else the last one a response carried; settled when it last
        -- changed state.
        v_source := json_build_object('runId', v_last.run_id, 'step', v_last.step, 'operationId', v_op.id,
          'attemptId', v_last.id, 'confirmedAt', eg_iso(v_op.updated_at), 'destinationRef', coalesce(
            (select facts ->> 'destinationRef' from observations where operation_id = v_op.id and result = v_op.state
              order by created_at desc, id limit 1),
            (select destination_ref from attempts where operation_id = v_op.id and destination_ref is not null
              order by number desc limit 1)));
      end if;
      perform eg_decided(p, p_input, 'duplicate', 'delegated_operation_done', v_op.id, null, v_op.key_hash, null,
        json_build_object('duplicateSkips', v_skips, 'source', v_source, 'claimedOperationId', v_claim));
      return json_build_object('verdict', 'duplicate', 'decisionId', p ->> 'decisionId', 'operationId', v_op.id,
        'duplicateSkips', v_skips, 'source', v_source, 'operationState', v_op.state, 'reconciliation', null);
    end if;
    if v_key.operation_id is distinct from v_op.id then
      v_reason := format('delegation_operation_superseded: operation %s no longer holds its key; operation %s does',
        v_op.id, v_key.operation_id);
    elsif v_key.state in ('released', 'pending', 'awaiting_input') and v_window is not null
        and v_key.created_at + v_window <= now() then
      v_reason := format('delegation_window_over: operation %s''s duplicate window ended at %s; propose it without Effectgate-Operation to start a new operation',
        v_op.id, eg_iso(v_key.created_at + v_window));
    end if;
  end if;

  if v_reason is null then
    return null;
  end if;
  perform eg_decided(p, p_input, 'block', v_reason, v_op.id, null, null, null,
    json_build_object('claimedOperationId', v_claim));
  return json_build_object('verdict', 'block', 'decisionId', p ->> 'decisionId', 'reason', v_reason,
    'operationId', v_op.id);
end $$;
