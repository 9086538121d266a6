-- The last seq of chain p_chain up to which every event is projected (eg_project.sql): just before
-- its first event the projection has not finished (one its last finished batch's snapshot did not
-- see), or the chain's head when it has none. Retention never removes an event past it
-- (eg_prune_cut, eg_prune): a decision, an operation or an attempt not yet projected would be lost
-- with its event.
create or replace function eg_projected_seq(p_chain int) returns bigint language sql stable as $$
    select coalesce(min(e.seq) - 1, (select last_seq from chain_head where id = p_chain))
    from log_projection c
    join events e on e.tx = any(array(select pg_snapshot_xip(c.after_snapshot)))
      or e.tx >= pg_snapshot_xmax(c.after_snapshot)
    where c.id and e.chain = p_chain
  $$;
