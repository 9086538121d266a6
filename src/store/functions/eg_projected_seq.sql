-- The last seq of chain p_chain up to which every event is projected (eg_project.sql): just before
-- its first event the projection has not finished (one its last finished batch's snapshot did not
-- see), or the chain's head when it has none. Retention never removes an event past it
-- (eg_prune_cut, eg_prune): a decision, an operation or an attempt not yet projected would be lost
-- with its event. Before an upgraded store's first projection by snapshot (eg_project_legacy.sql),
-- the per-chain frontiers of the versions before still say it.
create or replace function eg_projected_seq(p_chain int) returns bigint language sql stable as $$
    select case
      when c.after_snapshot is null then
        (select least(e.seq, r.seq) from event_projection e join row_projection r using (chain) where chain = p_chain)
      else
        coalesce((select min(e.seq) - 1 from eg_unseen_events(c.after_snapshot) e where e.chain = p_chain),
                 (select last_seq from chain_head where id = p_chain))
    end
    from log_projection c
    where c.id
  $$;
