-- A proposal for a key whose operation's outcome is unknown (docs/design.md §3 and §4.1): honored
-- idempotency retries at once with the same key; a reconcile lookup goes first (the first call
-- answers `reconcile` and records nothing; the gate looks and calls again with the observation);
-- an approved approval allows exactly one retry, and so does an active session grant of the run
-- (eg_grant.sql; its card is recorded as used under the grant); otherwise `hold` with an open
-- approval request.
-- Honored idempotency only within the destination's retention of the key (idempotency.retention):
-- past it, the retry goes to approval as for a tool without the guarantee.
-- A materially changed request is never an honored retry (the same key with another body is not
-- the same call): after reconciliation or approval it forks a new operation that supersedes this
-- one, which stays unknown. An approval is for that very request (migration 0011): only a proposal
-- with the fingerprint its card was asked about may use it; any other is held on its own card,
-- which says it changed. Returns null when the key left the unknown state before it was
-- locked: the caller looks again. p_lost: the facts of a reservation this very call found expired
-- without an outcome (eg_expire), recorded in the decision's event; null otherwise.
create or replace function eg_unknown(p jsonb, p_input text, p_key dedupe_keys, p_expires_at timestamptz,
  p_lost jsonb) returns json language plpgsql as $$
declare
  v_rule text := coalesce(p ->> 'unknownRule', 'hold');
  v_rec jsonb := case when jsonb_typeof(p -> 'reconciliation') = 'object' then p -> 'reconciliation' end;
  v_budget int := coalesce((p ->> 'retryBudget')::int, 1);
  v_window interval := eg_ms(p -> 'key' -> 'windowMs');
  v_key dedupe_keys%rowtype;
  v_prev attempts%rowtype;
  v_changed boolean;
  v_op text;
  v_op_state text;
  v_obs jsonb;
  v_decision text;
  v_approval approvals%rowtype;
  v_grant grants%rowtype;
  v_card text;
  v_used jsonb;
  v_last approvals%rowtype;
  v_skips int;
  v_to text;
  v_ref text;
  v_source json;
  v_request record;
  v_keyed boolean;
  v_fingerprint text := p -> 'request' ->> 'fingerprint';
  v_other approvals%rowtype;
begin
  if v_rec is null and v_rule = 'reconcile' then
    return json_build_object('verdict', 'reconcile', 'decisionId', null, 'operationId', p_key.operation_id,
      'attemptId', p_key.attempt_id);
  end if;

  -- The key's lock, then its operation's rows brought up to date (eg_project_operation.sql).
  select * into v_key from dedupe_keys where key_hash = p_key.key_hash for update;
  if v_key.state is distinct from 'unknown' then
    return null;
  end if;
  v_op := v_key.operation_id;
  perform eg_project_operation(v_op);
  select * into v_prev from attempts where id = v_key.attempt_id;
  v_changed := v_prev.id is not null and (v_prev.request ->> 'fingerprint') is distinct from v_fingerprint;
  select state, idempotency_header is not null into v_op_state, v_keyed from operations where id = v_op for update;

  if v_rec is not null then
    v_obs := eg_observe(p, v_op);
    if v_rec ->> 'result' in ('match', 'multiple') then
      -- The effect is there: settle the operation by this evidence, confirm the key, and answer the
      -- proposal as a duplicate of it. Two or more matches: it happened more than once.
      v_to := case when v_rec ->> 'result' = 'match' then 'succeeded' else 'duplicate_effect_confirmed' end;
      v_ref := v_rec -> 'remoteRefs' ->> 0;
      update dedupe_keys set state = 'confirmed', confirmed_at = now(), window_ends_at = now() + v_window,
        destination_ref = v_ref, expires_at = null
      where key_hash = v_key.key_hash;
      perform eg_set_operation_state(v_op, v_to);
      perform eg_withdraw_approvals(v_op, v_to);
      v_skips := eg_skip(p, v_key.key_hash, v_op);
      v_source := json_build_object('runId', v_key.run_id, 'step', v_key.step, 'operationId', v_op,
        'attemptId', v_key.attempt_id, 'confirmedAt', eg_iso(now()), 'destinationRef', v_ref);
      perform eg_decided(p, p_input, 'duplicate', 'reconciled_' || (v_rec ->> 'result'), v_op, null,
        v_key.key_hash, v_op, json_build_object('duplicateSkips', v_skips,
          'windowEndsAt', eg_iso(now() + v_window), 'source', v_source, 'observation', v_obs,
          'operation', json_build_object('stateChange', json_build_object('from', v_op_state, 'to', v_to)),
          'key', json_build_object('state', 'confirmed'), 'outcomeLost', p_lost));
      return json_build_object('verdict', 'duplicate', 'decisionId', p ->> 'decisionId', 'operationId', v_op,
        'duplicateSkips', v_skips, 'source', v_source, 'operationState', v_to,
        'reconciliation', v_rec ->> 'result');
    end if;
    -- none or inconclusive: absence proves little (docs/design.md §3). The state stays unknown; on
    -- to approval.
  end if;

  -- No retry is possible (budget spent, same request): say so now, by any rule, rather than ask
  -- for an approval that could never be used. A changed request forks and has its own budget.
  if not v_changed and v_key.attempt_number - v_key.input_rounds >= v_budget then
    perform eg_decided(p, p_input, 'block', 'retry_budget_exhausted', v_op, null, v_key.key_hash, null,
      json_build_object('attemptsUsed', v_key.attempt_number - v_key.input_rounds, 'attemptBudget', v_budget, 'observation', v_obs, 'outcomeLost', p_lost));
    return json_build_object('verdict', 'block', 'decisionId', p ->> 'decisionId',
      'reason', 'retry_budget_exhausted', 'operationId', v_op);
  end if;

  -- Honored idempotency lets the retry go only when the unknown attempts carried the key: an
  -- operation made in shadow mode (migration 0010) was sent without one, so the destination could
  -- not deduplicate a keyed retry against it; that retry needs a person, as for any other tool.
  -- Nor once the destination has forgotten the key (idempotency.retention, migration 0013): a key
  -- older than the vendor keeps it deduplicates nothing, so the retry needs a person (or a lookup).
  if v_rule = 'honored' and not v_changed and v_keyed and (eg_ms(p -> 'idempotency' -> 'retentionMs') is null
      or (select min(started_at) from attempts where operation_id = v_op)
        + eg_ms(p -> 'idempotency' -> 'retentionMs') > now()) then
    v_decision := 'destination_idempotency_honored';
  else
    -- An approval is of that very retry (docs/design.md §3): of the attempt it was asked about, which
    -- must still be the key's latest, and of the request it was asked about (its fingerprint): the
    -- same key values with another body (another payee) is another request a person never saw.
    select * into v_approval from approvals
      where operation_id = v_op and state = 'approved' and (expires_at is null or expires_at > now())
        and previous_attempt_id is not distinct from v_key.attempt_id and request_fingerprint = v_fingerprint
      order by decided_at limit 1 for update;
    if found then
      v_decision := 'operator_approved';
    else
      -- A session grant (eg_grant.sql): this run of this scope may retry unknown operations of this
      -- tool (or of every tool) for a while, without a card per call. Only a retry of the same
      -- request (a changed one is a new operation a person must see), and never one a person
      -- refused for this very attempt (a denied or revoked card). `for share`: a revoke committing
      -- meanwhile is waited for and its row read again, so no retry starts after it.
      if not v_changed and not exists (select 1 from approvals where operation_id = v_op
          and previous_attempt_id is not distinct from v_key.attempt_id and state in ('denied', 'revoked')) then
        select * into v_grant from grants
          where tenant = p -> 'scope' ->> 'tenant' and area = p -> 'scope' ->> 'area' and agent = p -> 'scope' ->> 'agent'
            and run_id = p ->> 'runId' and (tool_id is null or tool_id = p ->> 'toolId')
            and revoked_at is null and expires_at > now()
          order by granted_at limit 1
          for share;
        if found then
          v_decision := 'operator_approved';
        end if;
      end if;
    end if;
  end if;

  if v_decision is not null then
    if v_approval.id is not null then
      update approvals set state = 'used', used_by_attempt_id = p ->> 'newAttemptId', used_at = now()
        where id = v_approval.id;
      v_used := jsonb_build_object('id', v_approval.id, 'state', 'used', 'approvedBy', v_approval.decided_by,
        'approvedAt', eg_iso(v_approval.decided_at));
    elsif v_grant.id is not null then
      -- The retry's card (the open request, or a new one) is used under the grant and names it.
      select o_id into v_card from eg_request_approval(v_op, v_prev, 'grant:' || v_grant.id, v_fingerprint);
      update approvals set state = 'used', decided_by = v_grant.granted_by, decided_at = now(),
        reason = v_grant.reason, grant_id = v_grant.id, used_by_attempt_id = p ->> 'newAttemptId', used_at = now()
        where id = v_card;
      v_used := jsonb_build_object('id', v_card, 'state', 'used', 'approvedBy', v_grant.granted_by,
        'approvedAt', eg_iso(v_grant.granted_at), 'grantId', v_grant.id);
    end if;
    -- One card per request (migration 0011): the cards of the other requests asked about a retry of
    -- this attempt, which is no longer the next one once this retry (or fork) goes. Withdrawn, so a
    -- later hold of such a request asks about the attempt it would then follow, on a new card.
    update approvals set state = 'withdrawn', decided_at = coalesce(decided_at, now()),
        reason = coalesce(reason || ' / ', '') || 'withdrawn: another request''s retry of this attempt went (decision '
          || (p ->> 'decisionId') || ')'
      where operation_id = v_op and state in ('requested', 'approved')
        and id is distinct from coalesce(v_approval.id, v_card);
    if v_changed then
      update dedupe_keys set state = 'pending', operation_id = p ->> 'newOperationId', attempt_number = 1,
        input_rounds = 0, attempt_id = p ->> 'newAttemptId', run_id = p ->> 'runId', step = p ->> 'step', created_at = now(),
        expires_at = p_expires_at, confirmed_at = null, window_ends_at = null, destination_ref = null,
        operation_state = 'open'
      where key_hash = v_key.key_hash;
      return eg_allow_new(p, p_input, v_key.key_hash, p_expires_at, v_op,
        jsonb_build_object('observation', v_obs, 'approval', v_used, 'outcomeLost', p_lost));
    end if;
    update dedupe_keys set state = 'pending', attempt_number = v_key.attempt_number + 1,
      attempt_id = p ->> 'newAttemptId', run_id = p ->> 'runId', step = p ->> 'step', expires_at = p_expires_at,
      operation_state = 'open'
    where key_hash = v_key.key_hash;
    return eg_retry(p, p_input, v_key.key_hash, v_op, v_key.attempt_number + 1,
      v_key.attempt_number + 1 - v_key.input_rounds, v_prev, v_decision, p_expires_at,
      jsonb_build_object('observation', v_obs, 'approval', v_used, 'outcomeLost', p_lost));
  end if;

  -- hold: the retry needs a person. One open approval request per operation. Not in shadow mode
  -- (migration 0010): it sends the request anyway, so a card would ask a person about a retry that
  -- already happened; the would_hold decision is the record of what enforce mode would have asked.
  if p ->> 'mode' is distinct from 'shadow' then
    select * into v_request from eg_request_approval(v_op, v_prev, 'decision:' || (p ->> 'decisionId'), v_fingerprint);
  else
    select null::text as o_id, false as o_created into v_request;
  end if;
  -- The latest decided approval, reported only when it ended without a retry (denied, revoked,
  -- expired): a used one was followed by an attempt the agent already knows about.
  select * into v_last from approvals
    where operation_id = v_op and state in ('denied', 'revoked', 'approved', 'used')
    order by coalesce(used_at, revoked_at, decided_at) desc limit 1;
  if v_last.id is not null and not (v_last.state in ('denied', 'revoked')
      or (v_last.state = 'approved' and v_last.expires_at <= now())) then
    v_last := null;
  end if;
  -- An approval a person gave for another request of this attempt, still usable: this proposal is
  -- not the request she approved, so the agent and the trail are told it does not cover it.
  select * into v_other from approvals
    where operation_id = v_op and state = 'approved' and (expires_at is null or expires_at > now())
      and previous_attempt_id is not distinct from v_key.attempt_id
      and request_fingerprint is distinct from v_fingerprint
    order by decided_at desc limit 1;
  perform eg_decided(p, p_input, 'hold', 'outcome_unknown', v_op, null, v_key.key_hash, null, json_build_object(
    'approval', json_build_object('id', v_request.o_id, 'created', v_request.o_created),
    'previousAttempt', json_build_object('id', v_prev.id, 'number', v_prev.number,
      'dispatchState', v_prev.dispatch_state, 'status', v_prev.status, 'fingerprint', v_prev.request ->> 'fingerprint'),
    'requestChanged', v_changed, 'fingerprint', v_fingerprint,
    'approvedRequest', case when v_other.id is not null then json_build_object('id', v_other.id,
      'fingerprint', v_other.request_fingerprint) end,
    'lastApproval', case when v_last.id is not null then json_build_object('id', v_last.id,
      'state', case when v_last.state = 'approved' then 'expired' else v_last.state end) end,
    'observation', v_obs, 'outcomeLost', p_lost));
  return json_build_object('verdict', 'hold', 'decisionId', p ->> 'decisionId', 'operationId', v_op,
    'approvalId', v_request.o_id, 'previousAttemptId', v_prev.id, 'previousDispatchState', v_prev.dispatch_state,
    'requestChanged', v_changed, 'approvedRequest', case when v_other.id is not null then json_build_object(
      'id', v_other.id, 'fingerprint', v_other.request_fingerprint) end,
    'lastApproval', case when v_last.id is not null then json_build_object('id', v_last.id,
      'state', case when v_last.state = 'approved' then 'expired' else v_last.state end,
      'by', coalesce(v_last.revoked_by, v_last.decided_by), 'reason', v_last.reason) end,
    'reconciliation', v_rec ->> 'result');
end $$;
