-- Names an operation whose rows the calling hot writer left to the projection (eg_allow_new for a
-- fresh operation, eg_first_outcome for its first outcome) while its event sits in eg_batch's
-- queue, not yet appended: eg_project_chain refuses to project that operation until the batch
-- ends (eg_project_chain.sql says why). Outside a batch the event is appended at once and there is
-- nothing to name.
create or replace function eg_rows_unwritten(p_operation_id text) returns void language plpgsql as $$
  begin
    if left(current_setting('eg.deferred_events', true), 1) = '[' then
      perform set_config('eg.unprojected',
        coalesce(current_setting('eg.unprojected', true), '') || ' ' || p_operation_id, true);
    end if;
  end $$;
