-- Records, on the chain of the operation that lost it, what a proposal that took its key for a new
-- operation did to it: its expired reservation's attempt marked lost (p_extra.outcomeLost, from
-- eg_expire) or, as it awaited input, the operation cancelled (p_extra.closedOperation, from
-- eg_supersede_waiting). The new operation's decision.allow names the change and this event states
-- it, so every change of an operation is told by an event of its own (on its own chain, in order):
-- the projection applies to an operation's rows only the events that name it (eg_project_rows.sql).
-- Appended, like every event, as a last statement: eg_allow_new calls it beside its decision event,
-- the two in chain order (eg_batch.sql says why).
create or replace function eg_key_taken(p jsonb, p_old_op text, p_new_op text, p_key_hash text, p_extra jsonb)
    returns void language plpgsql as $$
  begin
    perform eg_append_event(p_old_op, 'operation.key_taken', p_old_op, '{"input":' ||
      json_build_object('operationId', p_old_op, 'takenBy', p_new_op, 'keyHash', p_key_hash,
        'decisionId', p ->> 'decisionId', 'runId', p ->> 'runId')::text || ',"facts":' ||
      json_build_object('outcomeLost', p_extra -> 'outcomeLost',
        'stateChange', p_extra -> 'closedOperation' -> 'stateChange', 'takenAt', now())::text || '}');
  end $$;
