-- The reservation protocol, hot path: `select eg_decide(<DecideInput as JSON text>)`, one
-- statement, one round trip. Answers allow, duplicate, pending, hold, halted, block or reconcile,
-- and records the decision with exactly one decision.<verdict> event (see README.md). The key
-- reservation is one atomic INSERT ... ON CONFLICT DO UPDATE ... WHERE <takeover allowed>, so two
-- gate processes sharing a database can never both own a key. Steps (a) to (f) below.
--
-- `set enable_seqscan = off` (applies to every statement this call runs, nested functions too):
-- every lookup of the protocol is a probe by key, and a session keeps the plan it made the first
-- time. On a store whose small tables autovacuum analysed (`runs` with no rows, a young
-- `dedupe_keys`), those plans are sequential scans that the table then outgrows before the next
-- analyse: on a store preloaded with 200k allows, duplicates fell from 3,766 to 1,255 req/s, with
-- PostgreSQL CPU per duplicate 244 -> 1,078 µs (bench/README.md). With seq scans priced out the
-- plan is the index probe whatever the statistics say; the cost of the setting is within noise.
-- `set lock_timeout = '4s'`: a call that waits longer than that for a row or table lock (a
-- migration's ALTER TABLE or CREATE INDEX, a stuck transaction) fails and rolls back, well inside
-- the gate's 10 s read timeout (hot-call.ts). Without it the gate gives up, answers 503 and sends
-- nothing, while the server still commits the call once the lock is free: a reservation whose
-- attempt was never dispatched, taken for a lost one (sent_no_response, an unknown operation held
-- for approval) once its pending_ttl runs out.
create or replace function eg_decide(p_input text) returns json language plpgsql
set enable_seqscan = off set lock_timeout = '4s' as $$
declare
  p jsonb := p_input::jsonb;
  v_scope jsonb := p -> 'scope';
  v_tenant text := v_scope ->> 'tenant';
  v_area text := v_scope ->> 'area';
  v_agent text := v_scope ->> 'agent';
  v_run text := p ->> 'runId';
  v_decision text := p ->> 'decisionId';
  v_key jsonb := p -> 'key';
  v_new_op text := p ->> 'newOperationId';
  v_budget int := coalesce((p ->> 'retryBudget')::int, 1);
  v_max_skips int := (p ->> 'maxDuplicateSkips')::int;
  v_skips int;
  v_hash text;
  v_window interval;
  v_expires timestamptz;
  v_row dedupe_keys%rowtype;
  v_source json;
  v_op text;
  v_number int;
  v_rounds int;
  v_op_state text;
  v_prev attempts%rowtype;
  v_fork_of text;
  v_result json;
  v_obs jsonb;
  v_lost jsonb;
  v_in_window boolean;
  v_expiry_checked boolean := false;
  v_projected boolean := false;
  v_fork_unchecked boolean;
begin
  -- (a) The loop breaker (eg_halted.sql): a halted run, or one that proposes again an effect it
  -- was already told max_duplicate_skips times is done, is answered `halted` whatever it proposes.
  v_result := eg_halted(p, p_input);
  if v_result is not null then
    return v_result;
  end if;

  if p ->> 'kind' = 'block' then
    perform eg_decided(p, p_input, 'block', p ->> 'reason', null, null, null, null, json_build_object());
    return json_build_object('verdict', 'block', 'decisionId', v_decision, 'reason', p ->> 'reason',
      'operationId', null);
  end if;

  -- (a2) A delegated worker's proposal (Effectgate-Operation) is an attempt of the operation it
  -- names, never a new one: eg_delegated refuses a claim that cannot be, answers one whose effect
  -- is done, and otherwise lets the steps below treat it as that operation's next proposal.
  if p ->> 'claimedOperationId' is not null then
    v_result := eg_delegated(p, p_input);
    if v_result is not null then
      return v_result;
    end if;
  end if;

  -- (b) No duplicate recognition: every proposal is a new operation.
  if jsonb_typeof(v_key) is distinct from 'object' then
    return eg_allow_new(p, p_input, null, null, null, null);
  end if;

  v_hash := v_key ->> 'hash';
  v_window := eg_ms(v_key -> 'windowMs');
  v_expires := now() + eg_ms(v_key -> 'pendingTtlMs');
  -- (c) Read before locking. A key confirmed inside its window is in a state no eg_decide can
  -- change, so the committed row is the answer: no upsert, no row lock, and concurrent duplicates
  -- of one key do not queue behind each other.
  select * into v_row from dedupe_keys where key_hash = v_hash;
  for v_try in 1..8 loop
    -- A delegated proposal answers only for the operation it names, and never makes a new one: if
    -- the key moved on since (a fork, a new window) or the operation's window ended while it waited
    -- (the upsert below refused it, or the awaiting_input rules would supersede it), eg_delegated
    -- says so instead of the rules below answering for another operation.
    if p ->> 'claimedOperationId' is not null and (v_row.operation_id is distinct from p ->> 'claimedOperationId'
        or (v_row.state in ('released', 'pending', 'awaiting_input') and v_window is not null
          and v_row.created_at + v_window <= now())) then
      v_result := eg_delegated(p, p_input);
      if v_result is not null then
        return v_result;
      end if;
    end if;
    if v_row.state = 'confirmed' and (v_row.window_ends_at is null or v_row.window_ends_at >= now()) then
      -- The operation's state from the key row (migration 0021), not from the operation's row: the
      -- duplicate reads one row. Null only for a key whose operation row is gone.
      v_op_state := v_row.operation_state;
      -- A lookup made for this proposal is evidence even when another proposal settled the key first.
      if jsonb_typeof(p -> 'reconciliation') = 'object' then
        v_obs := eg_observe(p, p -> 'reconciliation' ->> 'operationId');
      end if;
      v_skips := eg_skip(p, v_hash, v_row.operation_id);
      v_source := case when v_row.run_id is not null then json_build_object(
        'runId', v_row.run_id, 'step', v_row.step, 'operationId', v_row.operation_id,
        'attemptId', v_row.attempt_id, 'confirmedAt', eg_iso(v_row.confirmed_at),
        'destinationRef', v_row.destination_ref) end;
      perform eg_decided(p, p_input, 'duplicate', null, v_row.operation_id, null, v_hash, null, json_build_object(
        'duplicateSkips', v_skips, 'windowEndsAt', eg_iso(v_row.window_ends_at), 'source', v_source,
        'observation', v_obs));
      return json_build_object('verdict', 'duplicate', 'decisionId', v_decision, 'operationId', v_row.operation_id,
        'duplicateSkips', v_skips, 'source', v_source, 'operationState', coalesce(v_op_state, 'succeeded'),
        'reconciliation', null);
    end if;
    if v_row.state = 'unknown' then
      v_result := eg_unknown(p, p_input, v_row, v_expires, v_lost);
      if v_result is not null then
        return v_result;
      end if;
      select * into v_row from dedupe_keys where key_hash = v_hash;
      continue;
    end if;
    -- (c0) The destination accepted the key's operation and has not finished it (migration 0015):
    -- the key stays its; a lookup may settle it, else the proposal is pending (eg_accepted).
    if v_row.state = 'accepted' then
      v_result := eg_accepted(p, p_input, v_row);
      if v_result is not null then
        return v_result;
      end if;
      select * into v_row from dedupe_keys where key_hash = v_hash;
      continue;
    end if;
    -- (c1) A lookup that found the effect is evidence, whatever happened to the key while the gate
    -- looked (a late definite failure released it, a late input_required made it awaiting_input):
    -- the key is unknown again, and the unknown rules at the top of the loop settle the operation
    -- by the lookup and answer duplicate. Never an allow right after the gate saw the item exists.
    if v_row.state in ('released', 'awaiting_input') and jsonb_typeof(p -> 'reconciliation') = 'object'
        and p -> 'reconciliation' ->> 'result' in ('match', 'multiple')
        and v_row.operation_id = p -> 'reconciliation' ->> 'operationId' then
      update dedupe_keys set state = 'unknown', expires_at = null
      where key_hash = v_hash and state = v_row.state and operation_id = v_row.operation_id;
      select * into v_row from dedupe_keys where key_hash = v_hash;
      continue;
    end if;

    -- (c1b) The branches below (c2, c3, d, e) read the rows of the key's operation, which the hot
    -- path no longer writes: take the key's lock first, then bring that operation's chain up to
    -- date (eg_project_operation.sql), and look at the key again under the lock. Not for a pending
    -- key inside its pending_ttl (a concurrent proposal's, the common one): (d) skips it.
    if not v_projected and v_row.operation_id is not null and (v_row.state = 'awaiting_input'
        or (v_row.state = 'pending' and v_row.expires_at < now())
        or (v_row.state = 'released' and (v_window is null or v_row.created_at + v_window > now()))) then
      v_projected := true;
      select * into v_row from dedupe_keys where key_hash = v_hash for update;
      perform eg_project_operation(v_row.operation_id);
      continue;
    end if;

    -- (c2) The key's latest attempt was answered MCP input_required (docs/design.md §4.1): the tool did
    -- not run, it asked for input. The same request again inside the window (its continuation:
    -- the fingerprint ignores inputResponses and requestState) is the next attempt of that
    -- operation (eg_continue). A changed request forks a new operation, and one past the window is
    -- a new one; either way nothing can continue the one that asked, which is cancelled
    -- (eg_supersede_waiting). Never taken by the upsert at (e).
    if v_row.state = 'awaiting_input' then
      v_in_window := v_window is null or v_row.created_at + v_window > now();
      select * into v_prev from attempts where id = v_row.attempt_id;
      if v_in_window and (v_prev.request ->> 'fingerprint') is not distinct from (p -> 'request' ->> 'fingerprint') then
        v_result := eg_continue(p, p_input, v_row, v_expires);
      else
        v_result := eg_supersede_waiting(p, p_input, v_row, v_expires,
          case when v_in_window then v_row.operation_id end);
      end if;
      if v_result is not null then
        return v_result;
      end if;
      select * into v_row from dedupe_keys where key_hash = v_hash;
      continue;
    end if;

    -- (c3) A reservation past its pending_ttl whose attempt has no outcome is not a free key
    -- (docs/design.md §2, §4.1): its gate lost track (a crash, a store error when the outcome was
    -- written), so the attempt may have done the effect. eg_expire makes it sent_no_response
    -- (observation outcome_lost) and its operation unknown; inside the window the key becomes
    -- unknown too and this proposal is answered by the unknown rules at the top of the loop. With
    -- dedupe.on_expired: retry (onExpired) or past the window the key stays takeable below, the
    -- retry recorded as curator_accepted_risk. A reconcile tool looks first: nothing is recorded
    -- until the gate comes back with the lookup.
    if v_row.state = 'pending' and v_row.expires_at < now() and not v_expiry_checked then
      v_expiry_checked := true;
      v_in_window := v_window is null or v_row.created_at + v_window > now();
      if v_in_window and p ->> 'onExpired' is distinct from 'retry'
          and coalesce(p ->> 'unknownRule', 'hold') = 'reconcile'
          and jsonb_typeof(p -> 'reconciliation') is distinct from 'object'
          and exists (select 1 from attempts where id = v_row.attempt_id and dispatch_state is null) then
        return json_build_object('verdict', 'reconcile', 'decisionId', null, 'operationId', v_row.operation_id,
          'attemptId', v_row.attempt_id);
      end if;
      v_lost := eg_expire(p, v_row, v_in_window and p ->> 'onExpired' is distinct from 'retry');
      if not (v_lost ->> 'marked')::boolean then
        v_lost := null;
      end if;
      select * into v_row from dedupe_keys where key_hash = v_hash;
      continue;
    end if;

    -- (d) A materially changed request for a key whose operation is still inside its window is not
    -- a retry: it forks a new operation that supersedes the old one (docs/design.md §3).
    -- A pending key inside its pending_ttl is not looked at (its attempt's row may not be projected
    -- yet, and (c1b) does not wait for it): the upsert below cannot take such a key, and the guards
    -- on the upsert and the budget block at (f) refuse one that became takeable since this read, so
    -- the loop reads it again and checks it here then.
    v_fork_of := null;
    v_fork_unchecked := coalesce(v_row.state = 'pending' and v_row.expires_at >= now(), false);
    if v_row.state in ('released', 'pending') and (v_window is null or v_row.created_at + v_window > now())
        and not v_fork_unchecked then
      select * into v_prev from attempts where id = v_row.attempt_id;
      if v_prev.id is not null
          and (v_prev.request ->> 'fingerprint') is distinct from (p -> 'request' ->> 'fingerprint') then
        v_fork_of := v_row.operation_id;
      end if;
    end if;

    -- (e) Reserve the key: one atomic upsert decides ownership, across processes.
    insert into dedupe_keys as k (key_hash, tenant, area, agent, tool_id, state, operation_id, run_id, step,
      attempt_id, attempt_number, created_at, expires_at, operation_state)
    values (v_hash, v_tenant, v_area, v_agent, p ->> 'toolId', 'pending', v_new_op, v_run, p ->> 'step',
      p ->> 'newAttemptId', 1, now(), v_expires, 'open')
    on conflict (key_hash) do update set
      state = 'pending',
      -- A released or lost (expired pending) reservation of an operation still inside the window is
      -- a retry of THAT operation: same id, so the same Idempotency-Key goes out again.
      operation_id = case when v_fork_of is null and k.state <> 'confirmed'
          and (v_window is null or k.created_at + v_window > now())
        then k.operation_id else excluded.operation_id end,
      attempt_number = case when v_fork_of is null and k.state <> 'confirmed'
          and (v_window is null or k.created_at + v_window > now())
        then k.attempt_number + 1 else 1 end,
      input_rounds = case when v_fork_of is null and k.state <> 'confirmed'
          and (v_window is null or k.created_at + v_window > now())
        then k.input_rounds else 0 end,
      created_at = case when v_fork_of is null and k.state <> 'confirmed'
          and (v_window is null or k.created_at + v_window > now())
        then k.created_at else excluded.created_at end,
      run_id = excluded.run_id,
      step = excluded.step,
      attempt_id = excluded.attempt_id,
      expires_at = excluded.expires_at,
      confirmed_at = null,
      window_ends_at = null,
      destination_ref = null,
      -- A new operation starts open, and a retry reopens its own (eg_retry).
      operation_state = 'open'
    where (k.state = 'released'
        or (k.state = 'pending' and k.expires_at < now())
        or (k.state = 'confirmed' and k.window_ends_at < now()))
      -- 'awaiting_input' is never taken here either: (c2) answers it.
      -- 'unknown' is never taken over here (docs/design.md §4.1), and a retry needs attempt budget left
      -- (continuations of an input_required answer spent none: input_rounds).
      and (k.state = 'confirmed'
        or v_fork_of is not null
        or (v_window is not null and k.created_at + v_window <= now())
        or k.attempt_number - k.input_rounds < v_budget)
      -- The fork check was skipped for a key read as pending inside its pending_ttl: take nothing.
      and not v_fork_unchecked
      -- A delegated proposal takes the key only as the next attempt of the operation it names.
      and (p ->> 'claimedOperationId' is null or (v_fork_of is null and k.operation_id = p ->> 'claimedOperationId'
        and k.state <> 'confirmed' and (v_window is null or k.created_at + v_window > now())))
    returning k.operation_id, k.attempt_number, k.input_rounds into v_op, v_number, v_rounds;

    if found and v_op = v_new_op then
      -- A lookup made for this proposal (the key was released while the gate looked) is evidence too.
      if jsonb_typeof(p -> 'reconciliation') = 'object' then
        v_obs := eg_observe(p, p -> 'reconciliation' ->> 'operationId');
      end if;
      return eg_allow_new(p, p_input, v_hash, v_expires, case when v_number = 1 then v_fork_of end,
        jsonb_build_object('outcomeLost', v_lost, 'observation', v_obs));
    end if;

    if found then
      -- A retry of operation v_op: its parent is the previous attempt. One whose reservation was
      -- lost was retried only because the tool accepts the risk (on_expired: retry); one with an
      -- outcome definitely failed. (reservation_expired is kept for attempts recorded before 0003.)
      -- A lookup made for this proposal (the key was released while the gate looked) is evidence too.
      if jsonb_typeof(p -> 'reconciliation') = 'object' then
        v_obs := eg_observe(p, p -> 'reconciliation' ->> 'operationId');
      end if;
      perform eg_project_operation(v_op);
      select * into v_prev from attempts where operation_id = v_op and number = v_number - 1;
      return eg_retry(p, p_input, v_hash, v_op, v_number, v_number - v_rounds, v_prev,
        case when v_lost is not null then 'curator_accepted_risk'
          when v_prev.id is not null and v_prev.dispatch_state is null then 'reservation_expired'
          else 'previous_attempt_failed' end, v_expires, jsonb_build_object('outcomeLost', v_lost, 'observation', v_obs));
    end if;

    -- (f) Not ours. The upsert locked the row, so this read sees what the upsert saw.
    select * into v_row from dedupe_keys where key_hash = v_hash;
    if v_row.state = 'pending' and v_row.expires_at >= now() then
      return eg_pending(p, p_input, v_row, 'reserved_by_another_run');
    end if;
    if v_row.state in ('released', 'pending') and (v_window is null or v_row.created_at + v_window > now())
        and v_row.attempt_number - v_row.input_rounds >= v_budget and v_fork_of is null and not v_fork_unchecked then
      -- A lookup made for this proposal (the key was released while the gate looked) is evidence too.
      if jsonb_typeof(p -> 'reconciliation') = 'object' then
        v_obs := eg_observe(p, p -> 'reconciliation' ->> 'operationId');
      end if;
      perform eg_decided(p, p_input, 'block', 'retry_budget_exhausted', v_row.operation_id, null, v_hash, null,
        json_build_object('attemptsUsed', v_row.attempt_number - v_row.input_rounds, 'attemptBudget', v_budget,
          'outcomeLost', v_lost,
          'observation', v_obs));
      return json_build_object('verdict', 'block', 'decisionId', v_decision, 'reason', 'retry_budget_exhausted',
        'operationId', v_row.operation_id);
    end if;
    -- Confirmed or unknown: answered at the top of the loop. Anything else changed under us: again.
  end loop;
  raise exception 'effectgate: dedupe key % kept changing under eg_decide', v_hash;
end $$;
