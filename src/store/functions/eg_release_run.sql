-- Releases a halted run (migration 0009; `effectgate runs release`, POST /api/runs/:id/release):
-- an operator looked at why the loop breaker stopped it and lets it go on. The run's per-key
-- counts start again from zero (the key it looped on would otherwise halt it on its next
-- proposal), the release is recorded in run_releases, and one run.released event goes on the
-- chain of the release's own id (it belongs to no operation). The decisions and their events
-- are never touched: the halt stays in the trail. Returns the scope of the run it released.
--
-- The scope is the one given, or else the one halted run of that id; EG400 when several scopes
-- have a halted run of that id and none is named. EG404: the store knows no such run. EG409: the
-- run is not halted (never was, or already released).
create or replace function eg_release_run(p_input text) returns json language plpgsql as $$
declare
  p jsonb := p_input::jsonb;
  v_scope jsonb := p -> 'scope';
  v_run runs%rowtype;
  v_count int;
  v_id text := p ->> 'releaseId';
begin
  if jsonb_typeof(v_scope) is distinct from 'object' then
    select count(*) into v_count from runs where id = p ->> 'runId' and halted_at is not null;
    if v_count > 1 then
      raise exception 'run % is halted in % scopes: name the one to release (tenant, area, agent)', p ->> 'runId', v_count
        using errcode = 'EG400';
    end if;
    select * into v_run from runs where id = p ->> 'runId'
      order by halted_at is null, halted_at desc limit 1 for update;
  else
    select * into v_run from runs where id = p ->> 'runId' and tenant = v_scope ->> 'tenant'
      and area = v_scope ->> 'area' and agent = v_scope ->> 'agent' for update;
  end if;
  if v_run.id is null then
    raise exception 'no run % has a duplicate skip or a halt recorded', p ->> 'runId' using errcode = 'EG404';
  end if;
  if v_run.halted_at is null then
    raise exception 'run % is not halted: only a halted run can be released', v_run.id using errcode = 'EG409';
  end if;
  update runs set halted_at = null, halt_decision_id = null, halted_key_hash = null, releases = releases + 1
    where tenant = v_run.tenant and area = v_run.area and agent = v_run.agent and id = v_run.id;
  delete from run_key_skips
    where tenant = v_run.tenant and area = v_run.area and agent = v_run.agent and run_id = v_run.id;
  insert into run_releases (id, tenant, area, agent, run_id, halt_decision_id, halted_at, released_by, reason)
  values (v_id, v_run.tenant, v_run.area, v_run.agent, v_run.id, v_run.halt_decision_id, v_run.halted_at,
    p ->> 'by', p ->> 'reason');
  perform eg_append_event(v_id, 'run.released', null, '{"input":' || p_input || ',"facts":' ||
    json_build_object('releaseId', v_id, 'runId', v_run.id,
      'scope', json_build_object('tenant', v_run.tenant, 'area', v_run.area, 'agent', v_run.agent),
      'haltDecisionId', v_run.halt_decision_id, 'haltedAt', eg_iso(v_run.halted_at))::text || '}');
  return json_build_object('tenant', v_run.tenant, 'area', v_run.area, 'agent', v_run.agent);
end $$;
