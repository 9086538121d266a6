-- Whether proposal p is a client's automatic repeat of the call whose skip was last counted for
-- its run and key (run_key_skips.call_key, call_at, call_repeats; migration 0014): the same call
-- (eg_call_key: the agent's own idempotency key) within 10 seconds of that skip, and fewer than
-- 10 repeats answered since. Such a repeat is answered and recorded as a duplicate, but neither counted (eg_skip) nor a reason to
-- halt (eg_halted): it is the agent's library retrying, not the agent proposing again. Bounded,
-- so an agent that loops with one fixed key of its own is still counted, ten repeats later at most.
-- Without the agent's key nothing is a repeat: eg_skip relies on that to leave its UPDATE out.
create or replace function eg_call_repeat(p jsonb, p_call_key text, p_call_at timestamptz, p_repeats int)
returns boolean language sql stable as $$
  select p_call_key is not null and p_call_key = eg_call_key(p)
    and p_call_at > now() - interval '10 seconds' and p_repeats < 10
$$;
