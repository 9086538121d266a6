-- Called by a hot writer that leaves an operation's rows to the projection (eg_allow_new for a
-- fresh operation, p_outcome false; eg_first_outcome for its first outcome, p_outcome true), with
-- the input p those rows will be made from. Two things, both for the projection's sake:
--
-- - It refuses what the rows would refuse (EG400, or the cast's own error), before the event is
--   written: the projection makes the rows later, from committed events, and an event it could not
--   write would stop it there for good (every round, every reader, every rare path of that chain).
--   Written directly, the rows refused such an input by their NOT NULL and CHECK constraints and
--   their column types; these are the same conditions (migrations 0001 to 0015).
-- - Inside eg_batch, where the event sits in the batch's queue until the batch ends, it names the
--   operation (eg.unprojected): eg_project_operation refuses to project it until then
--   (eg_project_operation.sql says why). Outside a batch the event is appended at once.
create or replace function eg_rows_unwritten(p_operation_id text, p jsonb, p_outcome boolean) returns void
    language plpgsql as $$
  declare
    v_ok boolean;
  begin
    -- The casts the rows' columns make, each an error of its own when it fails; then the values
    -- their NOT NULL and CHECK constraints take.
    if p_outcome then
      perform (p ->> 'status')::int, (p ->> 'durationMs')::double precision, (p ->> 'replayed')::boolean;
      v_ok := p ->> 'dispatchState' in ('not_sent', 'sent_no_response', 'response_received', 'execution_error');
    else
      perform (p -> 'key' ->> 'windowMs')::numeric::bigint, now() + eg_ms(p -> 'deadlineMs');
      v_ok := p ->> 'toolId' is not null and p ->> 'runId' is not null and p ->> 'decisionId' is not null
        and p -> 'scope' ->> 'tenant' is not null and p -> 'scope' ->> 'area' is not null
        and p -> 'scope' ->> 'agent' is not null and jsonb_typeof(p -> 'request') is distinct from 'null'
        and p -> 'request' is not null
        and (p ->> 'unknownRule' is null or p ->> 'unknownRule' in ('honored', 'reconcile', 'hold'));
    end if;
    if not coalesce(v_ok, false) then
      raise exception 'effectgate: % % cannot make its operation''s rows (a missing or malformed field)',
        case when p_outcome then 'the outcome of operation' else 'the proposal of operation' end, p_operation_id
        using errcode = 'EG400';
    end if;
    if left(current_setting('eg.deferred_events', true), 1) = '[' then
      perform set_config('eg.unprojected',
        coalesce(current_setting('eg.unprojected', true), '') || ' ' || p_operation_id, true);
    end if;
  end $$;
