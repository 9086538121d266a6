-- Retention, step 1 (`effectgate audit prune`): where each chain would be cut to
-- remove the events recorded before p_before. Read only. For every chain: its base (the last event
-- removed so far, 0 and the genesis hash while none was), its cut (the last event recorded before
-- p_before, or the base when none is) and the cut event's hash, as a JSON array by chain.
--
-- Events are in time order along a chain (eg_append_event never records an earlier time than its
-- predecessor's), so the events before p_before are a prefix of the chain and the cut is found by
-- binary search over seq: about 25 primary-key probes per chain, whatever the log's size. A seq
-- with no event (a gap: the log does not verify) is refused (EG422): verify before pruning.
--
-- Once the log is sealed (audit_checkpoints has a row), only sealed events are cut: a chain's cut
-- is at most its seq in the latest checkpoint, so every removed event is in a signed tree head
-- and verification resumes from a checkpoint's frontier (eg_prune refuses the rest).
create or replace function eg_prune_cut(p_before timestamptz) returns json language plpgsql stable as $$
  declare
    v_head record;
    v_lo bigint;
    v_hi bigint;
    v_mid bigint;
    v_at timestamptz;
    v_hash text;
    v_out json[] := '{}';
    v_sealed jsonb := (select heads from audit_checkpoints order by size desc limit 1);
  begin
    for v_head in select id, base_seq, base_hash, last_seq from chain_head order by id loop
      v_lo := v_head.base_seq;
      v_hi := case when v_sealed is null then v_head.last_seq
        else greatest(v_head.base_seq, least(v_head.last_seq, coalesce((v_sealed ->> v_head.id::text)::bigint, 0))) end;
      -- Nor past what the projection has finished (eg_projected_seq.sql).
      v_hi := greatest(v_head.base_seq, least(v_hi, eg_projected_seq(v_head.id)));
      while v_lo < v_hi loop
        v_mid := (v_lo + v_hi + 1) / 2;
        v_at := null;
        select recorded_at into v_at from events where chain = v_head.id and seq = v_mid;
        if v_at is null then
          raise exception 'effectgate: chain % has no event % (the log does not verify): prune refused', v_head.id, v_mid
            using errcode = 'EG422';
        end if;
        if v_at < p_before then
          v_lo := v_mid;
        else
          v_hi := v_mid - 1;
        end if;
      end loop;
      v_hash := case when v_lo = v_head.base_seq then v_head.base_hash
        else (select hash from events where chain = v_head.id and seq = v_lo) end;
      v_out := v_out || json_build_object('chain', v_head.id, 'baseSeq', v_head.base_seq, 'baseHash', v_head.base_hash,
        'cutSeq', v_lo, 'cutHash', v_hash);
    end loop;
    return array_to_json(v_out);
  end $$;
