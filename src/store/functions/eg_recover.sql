-- Crash recovery, step 1 of 2: the attempts persisted without an outcome whose gate is gone, read
-- without locks, oldest first. The caller (KyselyStore.recover) then settles each one with
-- eg_recover_attempt in its OWN transaction: handling all of them in one would take a chain head
-- (an event) before the next candidate's key, against the global lock order, and deadlock with a
-- decide of that key, while holding up to every chain head until commit.
--
-- Orphaned: an attempt of a gate that stopped or whose heartbeat is older than staleAfterMs; one
-- of a previous life of the calling gate (same instance id, started before this life registered:
-- a restarted gate recovers at once, not after the stale window); any attempt when the caller is
-- exclusive (embedded store: the directory lock proves no other gate runs); and any attempt long
-- past its dispatch deadline. Never one of the calling gate's current life.
--
-- `set enable_seqscan = off`, as eg_decide: the candidates are read through attempts_open_idx (only
-- attempts without an outcome), never by scanning every attempt because statistics of a young
-- table said it was small.
create or replace function eg_recover(p_input text) returns json language plpgsql stable
set enable_seqscan = off as $$
declare
  p jsonb := p_input::jsonb;
  v_me text := p ->> 'instanceId';
  v_exclusive boolean := coalesce((p ->> 'exclusive')::boolean, false);
  v_stale interval := eg_ms(p -> 'staleAfterMs');
  v_my_start timestamptz;
  v_out json;
begin
  select started_at into v_my_start from gate_instances where id = v_me;
  select coalesce(json_agg(c.id order by c.started_at), '[]'::json) into v_out from (
    select a.id, a.started_at from attempts a
      left join gate_instances g on g.id = a.gate_instance
    where a.dispatch_state is null
      -- Never this life's own attempts: this gate is running them (or its outbox holds their outcome).
      and not (v_me is not null and a.gate_instance is not distinct from v_me
        and (v_my_start is null or a.started_at >= v_my_start))
      and (v_exclusive
        or (v_me is not null and a.gate_instance is not distinct from v_me)
        or (g.id is not null and (g.stopped_at is not null or g.heartbeat_at < now() - v_stale))
        or coalesce(a.deadline_at, a.started_at + interval '10 minutes') < now() - v_stale)) c;
  return v_out;
end $$;
