-- Appends an outcome's one attempt.outcome event, for eg_record_outcome and eg_first_outcome:
-- the outcome as sent, and what the store made of it. p_key_state: the state the outcome moved the
-- operation's key to, null when it did not move it (its confirmation time and window with it).
create or replace function eg_outcome_event(p_input text, p_op_id text, p_number int, p_superseded boolean,
    p_late boolean, p_kept_unknown boolean, p_change json, p_key_state text, p_window interval) returns void
language plpgsql as $$
  begin
    perform eg_append_event(p_op_id, 'attempt.outcome', p_op_id, '{"input":' || p_input || ',"facts":' ||
      json_build_object('number', p_number, 'finishedAt', now(), 'superseded', p_superseded,
        'late', coalesce(p_late, false),
        'keptUnknown', coalesce(p_kept_unknown, false),
        'stateChange', p_change,
        'key', case when p_key_state is not null then json_build_object('state', p_key_state,
          'confirmedAt', case when p_key_state = 'confirmed' then eg_iso(now()) end,
          'windowEndsAt', case when p_key_state = 'confirmed' then eg_iso(now() + p_window) end) end)::text || '}');
  end $$;
