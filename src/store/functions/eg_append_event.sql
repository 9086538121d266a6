-- Appends one event to the chain of p_chain_of, in ONE statement: the UPDATE of the head row takes
-- its lock, moves it (seq, hash, time) and returns what the event row needs; the INSERT reads that
-- in the same statement. The lock is held from there to COMMIT, so this is the very last
-- statement of every function that writes. The hash input is reproduced byte for byte by
-- computeEventHash() in audit-chain.ts.
--
-- Time: the clock is read before the lock and the event is recorded at greatest(clock, the
-- chain's last time) (chain_head.last_us), so time never goes backwards along a chain even when
-- this call waited for the lock behind a later clock reading. Every expression of the UPDATE is
-- computed from the locked, current head row (a waiter re-reads it), never from a stale one.
--
-- Inside eg_batch (eg.deferred_events starts with '[') the event is only queued; eg_batch appends its queue
-- through this function at its end, in chain order (eg_batch.sql says why).
create or replace function eg_append_event(p_chain_of text, p_type text, p_operation_id text, p_payload text)
    returns void language plpgsql as $$
  declare
    v_chain int := eg_chain_of(p_chain_of);
    -- extract(epoch) is numeric (exact) since PostgreSQL 14: no float rounding of microseconds.
    v_us bigint := (extract(epoch from clock_timestamp()) * 1000000)::bigint;
  begin
    if left(current_setting('eg.deferred_events', true), 1) = '[' then
      perform set_config('eg.deferred_events', current_setting('eg.deferred_events') ||
        json_build_object('chain', v_chain, 'chainOf', p_chain_of, 'type', p_type, 'operationId', p_operation_id,
          'payload', p_payload)::text || ',', true);
      return;
    end if;
    with head as (
      update chain_head set
        last_seq = last_seq + 1,
        prev_hash = last_hash,
        last_us = greatest(v_us, last_us),
        last_hash = encode(sha256(convert_to(
          last_hash || E'\n' || id::text || E'\n' || (last_seq + 1)::text || E'\n' || p_type || E'\n' ||
          coalesce(p_operation_id, '') || E'\n' || greatest(v_us, last_us)::text || E'\n' || p_payload,
          'UTF8')), 'hex')
      where id = v_chain
      returning id, last_seq, prev_hash, last_us, last_hash
    )
    insert into events (chain, seq, type, operation_id, recorded_at, recorded_at_us, payload, prev_hash, hash)
    select id, last_seq, p_type, p_operation_id, timestamptz 'epoch' + last_us * interval '1 microsecond',
      last_us, p_payload, prev_hash, last_hash
    from head;
  end $$;
