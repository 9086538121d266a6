-- Which call of the agent's a proposal is (migration 0014): the idempotency key the agent sent
-- itself, which an SDK keeps across its own retries of one call and changes for the next call
-- (stripe-node: one per call). Null without one: the request fingerprint cannot tell a library's
-- retry from a model proposing the identical call again, the very loop the breaker is for.
-- eg_call_repeat compares it with the last counted skip's.
create or replace function eg_call_key(p jsonb) returns text language sql stable as $$
  select 'key:' || (p -> 'idempotency' ->> 'agentKey')
$$;
