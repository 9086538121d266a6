-- Moves the row frontiers (row_projection, migration 0023) of chains p_chains, whose rows the
-- caller has locked, up to their committed heads, at most p_per_chain events each (null: all):
-- the events of each chain's range made into operation and attempt rows (eg_project_rows), and the
-- frontier set to the range's end. Answers whether a chain has events left. Its own statements,
-- after the caller's lock statement: their snapshots hold every event committed before the locks
-- were granted, and a chain's committed events are a gap-free prefix of it. Shared by the projector's
-- rounds (eg_project) and the rare paths (eg_project_chain).
create or replace function eg_project_frontiers(p_chains int[], p_per_chain bigint) returns boolean
    language plpgsql as $$
  declare
    v_chains int[];
    v_after bigint[];
    v_through bigint[];
    v_more boolean;
  begin
    select array_agg(r.chain order by r.chain), array_agg(r.seq order by r.chain),
        array_agg(least(h.last_seq, r.seq + coalesce(p_per_chain, h.last_seq)) order by r.chain),
        coalesce(bool_or(h.last_seq > r.seq + coalesce(p_per_chain, h.last_seq)), false)
      into v_chains, v_after, v_through, v_more
      from row_projection r join chain_head h on h.id = r.chain
      where r.chain = any(p_chains) and h.last_seq > r.seq;
    if v_chains is not null then
      perform eg_project_rows(v_chains, v_after, v_through);
      update row_projection r set seq = t.seq from unnest(v_chains, v_through) t(chain, seq) where r.chain = t.chain;
    end if;
    return v_more;
  end $$;
