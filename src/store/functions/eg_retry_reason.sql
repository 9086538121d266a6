-- The reason of a later attempt, from the closed set (docs/design.md §3): the client may only claim
-- operator_requested; a changed credential reference is credential_refreshed; otherwise it
-- follows from how the previous attempt ended. A definite 4xx other than 429 has no reason in
-- the set: null, and the retry decision says previous_attempt_failed.
create or replace function eg_retry_reason(p jsonb, p_prev attempts) returns text language sql stable as $$
    select case
      when p_prev.id is null then null
      when p ->> 'clientRetryReason' = 'operator_requested' then 'operator_requested'
      when p_prev.request ->> 'authorityRef' is not null and p -> 'request' ->> 'authorityRef' is not null
        and p_prev.request ->> 'authorityRef' <> p -> 'request' ->> 'authorityRef' then 'credential_refreshed'
      when p_prev.dispatch_state = 'not_sent' then 'connection_not_established'
      when p_prev.status = 429 then 'rate_limited'
      when p_prev.status between 500 and 599 then 'destination_5xx'
      when p_prev.dispatch_state is null or p_prev.dispatch_state = 'sent_no_response'
        then 'response_lost_after_dispatch'
      else null end
  $$;
