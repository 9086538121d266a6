-- Appends one event to the chain of p_chain_of. The head row lock is taken last and held only
-- for the hash, one insert and one update (then COMMIT). The hash input is reproduced byte for
-- byte by computeEventHash() in audit-chain.ts. The time is read after the lock, so it never goes
-- backwards along a chain.
create or replace function eg_append_event(p_chain_of text, p_type text, p_operation_id text, p_payload text)
    returns void language plpgsql as $$
  declare
    v_chain int := eg_chain_of(p_chain_of);
    v_seq bigint;
    v_prev text;
    v_hash text;
    v_at timestamptz;
    v_us bigint;
  begin
    select last_seq + 1, last_hash into v_seq, v_prev from chain_head where id = v_chain for update;
    v_at := clock_timestamp();
    -- extract(epoch) is numeric (exact) since PostgreSQL 14: no float rounding of microseconds.
    v_us := (extract(epoch from v_at) * 1000000)::bigint;
    v_hash := encode(sha256(convert_to(
      v_prev || E'\n' || v_chain::text || E'\n' || v_seq::text || E'\n' || p_type || E'\n' ||
      coalesce(p_operation_id, '') || E'\n' || v_us::text || E'\n' || p_payload, 'UTF8')), 'hex');
    with appended as (
      insert into events (chain, seq, type, operation_id, recorded_at, recorded_at_us, payload, prev_hash, hash)
      values (v_chain, v_seq, p_type, p_operation_id, v_at, v_us, p_payload, v_prev, v_hash)
    )
    update chain_head set last_seq = v_seq, last_hash = v_hash where id = v_chain;
  end $$;
