-- Retention, step 3 (`effectgate audit prune`), one chain per call and
-- transaction: removes the chain's events after its base up to the cut that eg_prune_cut gave and
-- that the archive (step 2, a verified `audit export` segment) ends with, and makes that cut the
-- chain's new base. p_cut: { chain, baseSeq, baseHash, cutSeq, cutHash }. Returns how many events
-- it removed.
--
-- Refused (EG422), removing nothing, when the chain is no longer where the archive says: another
-- prune moved its base meanwhile, or the cut event is not the archived one (its hash differs). The
-- head row is locked first, so appends to this chain wait for the removal (a chain's events only,
-- so the other chains keep going). The events table's trigger lets a DELETE through only for an
-- event at or below its chain's base with eg.pruning on: the base is moved first. Once the log is
-- sealed, a cut past the chain's seq in the latest checkpoint is refused too (EG422): an event no
-- checkpoint covers is never removed (eg_prune_cut never offers one), and so is one past what the
-- projections have read (migrations 0019, 0023): its decision or rows would be lost.
create or replace function eg_prune(p_cut text) returns json language plpgsql as $$
  declare
    c jsonb := p_cut::jsonb;
    v_chain int := (c ->> 'chain')::int;
    v_cut bigint := (c ->> 'cutSeq')::bigint;
    v_head chain_head%rowtype;
    v_removed bigint;
  begin
    select * into v_head from chain_head where id = v_chain for update;
    if not found then
      raise exception 'effectgate: the store has no chain %', v_chain using errcode = 'EG422';
    end if;
    if v_head.base_seq <> (c ->> 'baseSeq')::bigint or v_head.base_hash <> c ->> 'baseHash' then
      raise exception 'effectgate: chain % was pruned meanwhile (base %, the archive starts after %)',
        v_chain, v_head.base_seq, c ->> 'baseSeq' using errcode = 'EG422';
    end if;
    if exists (select 1 from audit_checkpoints) and v_cut > coalesce((select (heads ->> v_chain::text)::bigint
        from audit_checkpoints order by size desc limit 1), 0) then
      raise exception 'effectgate: event % of chain % is not sealed yet: prune refused', v_cut, v_chain
        using errcode = 'EG422';
    end if;
    if v_cut > eg_projected_seq(v_chain) then
      raise exception 'effectgate: event % of chain % is not projected yet: prune refused', v_cut, v_chain
        using errcode = 'EG422';
    end if;
    if v_cut = v_head.base_seq then
      return json_build_object('chain', v_chain, 'removed', 0);
    end if;
    if v_cut < v_head.base_seq or v_cut > v_head.last_seq
        or not exists (select 1 from events where chain = v_chain and seq = v_cut and hash = c ->> 'cutHash') then
      raise exception 'effectgate: event % of chain % is not the one the archive ends with', v_cut, v_chain
        using errcode = 'EG422';
    end if;
    update chain_head set base_seq = v_cut, base_hash = c ->> 'cutHash' where id = v_chain;
    perform set_config('eg.pruning', 'on', true);
    delete from events where chain = v_chain and seq > v_head.base_seq and seq <= v_cut;
    get diagnostics v_removed = row_count;
    perform set_config('eg.pruning', 'off', true);
    return json_build_object('chain', v_chain, 'removed', v_removed);
  end $$;
