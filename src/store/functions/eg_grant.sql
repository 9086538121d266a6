-- Session grants (migration 0008; docs/design.md §3 "Approvals"): `create` lets
-- one run of one scope retry unknown operations (of p.toolId, or of every tool when it is null)
-- until p.ttlMs from now; `revoke` ends one early. One grant.created / grant.revoked event each,
-- on the grant's own chain (it belongs to no operation). Returns the grant's id.
--
-- The scope is the one given, or else the one the run's recorded decisions name; a run that
-- decided in no scope, or in several, must be given one (EG400). EG404: no such grant. EG409: the
-- grant is already revoked or expired.
create or replace function eg_grant(p_input text) returns text language plpgsql as $$
declare
  p jsonb := p_input::jsonb;
  v_action text := p ->> 'action';
  v_scope jsonb := p -> 'scope';
  v_scopes int;
  v_id text;
  v_row grants%rowtype;
  v_state text;
begin
  if v_action = 'create' then
    if jsonb_typeof(v_scope) is distinct from 'object' then
      -- The run's decisions are a projection: bring it up to date first (eg_project.sql).
      perform eg_project(100000, true);
      select count(*), min(jsonb_build_object('tenant', tenant, 'area', area, 'agent', agent)::text)::jsonb
        into v_scopes, v_scope
        from (select distinct tenant, area, agent from decisions where run_id = p ->> 'runId') s;
      if v_scopes <> 1 then
        raise exception '%', case when v_scopes = 0
          then format('run %s has decided nothing yet: name its scope (tenant, area, agent)', p ->> 'runId')
          else format('run %s decided in %s scopes: name the one the grant is for (tenant, area, agent)', p ->> 'runId', v_scopes) end
          using errcode = 'EG400';
      end if;
    end if;
    if jsonb_typeof(p -> 'ttlMs') is distinct from 'number' or (p ->> 'ttlMs')::numeric <= 0
        or (p ->> 'ttlMs')::numeric > 7 * 86400000 then
      raise exception 'a grant lasts more than 0 and at most 7 days (a batch recovery, not a standing permission)'
        using errcode = 'EG400';
    end if;
    v_id := p ->> 'grantId';
    insert into grants (id, tenant, area, agent, run_id, tool_id, granted_by, reason, expires_at)
    values (v_id, v_scope ->> 'tenant', v_scope ->> 'area', v_scope ->> 'agent', p ->> 'runId', p ->> 'toolId',
      p ->> 'by', p ->> 'reason', now() + eg_ms(p -> 'ttlMs'));
    perform eg_append_event(v_id, 'grant.created', null, '{"input":' || p_input || ',"facts":' ||
      json_build_object('grantId', v_id, 'scope', v_scope, 'expiresAt', eg_iso(now() + eg_ms(p -> 'ttlMs')))::text || '}');
    return v_id;
  elsif v_action = 'revoke' then
    select * into v_row from grants where id = p ->> 'grantId' for update;
    if not found then
      raise exception 'no grant %', p ->> 'grantId' using errcode = 'EG404';
    end if;
    v_state := case when v_row.revoked_at is not null then 'revoked' when v_row.expires_at <= now() then 'expired'
      else 'active' end;
    if v_state <> 'active' then
      raise exception 'grant % is %: only an active grant can be revoked', v_row.id, v_state using errcode = 'EG409';
    end if;
    update grants set revoked_by = p ->> 'by', revoked_at = now(), revoke_reason = p ->> 'reason' where id = v_row.id;
    perform eg_append_event(v_row.id, 'grant.revoked', null, '{"input":' || p_input || ',"facts":' ||
      json_build_object('grantId', v_row.id, 'runId', v_row.run_id, 'toolId', v_row.tool_id)::text || '}');
    return v_row.id;
  end if;
  raise exception 'unknown grant action %', v_action;
end $$;
