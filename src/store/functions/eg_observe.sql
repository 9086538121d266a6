-- Records a reconciliation lookup as an observation row; returns its facts for the event.
create or replace function eg_observe(p jsonb, p_op text) returns jsonb language plpgsql as $$
  declare
    v_rec jsonb := p -> 'reconciliation';
    v_id text := gen_random_uuid()::text;
    v_facts jsonb := jsonb_build_object('endpoint', v_rec -> 'endpoint', 'queryFingerprint', v_rec -> 'queryFingerprint',
      'matches', v_rec -> 'matches', 'remoteRefs', v_rec -> 'remoteRefs', 'status', v_rec -> 'status',
      'error', v_rec -> 'error', 'durationMs', v_rec -> 'durationMs', 'startedAt', v_rec -> 'startedAt',
      'lookedUpOperationId', v_rec -> 'operationId', 'lookedUpAttemptId', v_rec -> 'attemptId');
  begin
    -- The observation's operation must have its row (a foreign key): eg_project_operation.sql.
    perform eg_project_operation(p_op);
    insert into observations (id, operation_id, attempt_id, kind, result, facts, decision_id)
    values (v_id, p_op, v_rec ->> 'attemptId', 'reconciliation', v_rec ->> 'result', v_facts, p ->> 'decisionId');
    return jsonb_build_object('id', v_id, 'kind', 'reconciliation', 'result', v_rec ->> 'result') || v_facts;
  end $$;
