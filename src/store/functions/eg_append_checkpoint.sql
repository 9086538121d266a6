-- The sealer's one write (src/store/audit-sealer.ts): appends checkpoint p_checkpoint
-- ({size, heads, batch, root, frontier, sealedAt, note}; batch {after, target, through} or null,
-- migration 0026) if the log's latest checkpoint is still p_after
-- (its size; null: the log has none yet). Returns false, writing nothing, when another sealer
-- appended meanwhile: the caller reads the new latest one and seals from there. Gates sharing a
-- database each run a sealer; this compare-and-append keeps their checkpoints one line, never a
-- fork.
--
-- The advisory lock (any fixed number, 'eg' 0x65 0x67 then 'seal' in the low bits: 1701273973)
-- makes concurrent appends take turns: the max(size) below is read after the lock, in a fresh
-- snapshot (read committed), so the second one sees the first one's row. Refused (EG422) when the
-- checkpoint does not extend p_after: a sealer's bug, never written; and when a checkpoint of the
-- old form (no batch) would follow one by snapshot: the sealer of a gate of an earlier version,
-- which would seal again by chain the events the batches sealed.
create or replace function eg_append_checkpoint(p_after bigint, p_checkpoint text) returns boolean
    language plpgsql as $$
  declare
    c jsonb := p_checkpoint::jsonb;
    v_size bigint := (c ->> 'size')::bigint;
    v_latest bigint;
  begin
    if (p_after is null and v_size <> 0) or (p_after is not null and v_size <= p_after) then
      raise exception 'effectgate: checkpoint % does not extend the log after %', v_size, coalesce(p_after::text, 'none')
        using errcode = 'EG422';
    end if;
    perform pg_advisory_xact_lock(1701273973);
    select max(size) into v_latest from audit_checkpoints;
    if v_latest is distinct from p_after then
      return false;
    end if;
    if jsonb_typeof(c -> 'batch') is distinct from 'object'
        and exists (select 1 from audit_checkpoints where size = v_latest and target_snapshot is not null) then
      raise exception 'effectgate: this log is sealed by snapshot; a sealer of an earlier version cannot extend it (upgrade the gate)'
        using errcode = 'EG422';
    end if;
    insert into audit_checkpoints (size, heads, root, frontier, sealed_at, note, after_snapshot, target_snapshot, through_pos)
      values (v_size, c -> 'heads', c ->> 'root', c ->> 'frontier', (c ->> 'sealedAt')::timestamptz, c ->> 'note',
        (c -> 'batch' ->> 'after')::pg_snapshot, (c -> 'batch' ->> 'target')::pg_snapshot,
        (c -> 'batch' ->> 'through')::bigint);
    return true;
  end $$;
