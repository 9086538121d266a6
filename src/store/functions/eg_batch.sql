-- Group commit: `select eg_batch(<fns>, <inputs>)` runs several hot-path calls of ONE gate process
-- in one statement, one transaction and one round trip, and answers their results as a JSON array
-- in input order. <fns> is the function every call runs ('eg_decide' or 'eg_record_outcome'), or,
-- when proposals and outcomes share the batch, a JSON array naming each call's, in input order.
-- <inputs> is a JSON array of the calls' inputs, as text: json (not jsonb) keeps each element's
-- text as sent, so every call gets, and records in its event, exactly the text it would have had
-- alone; and the client only joins the texts it has, where a text[] parameter made the driver
-- escape every quote of every input. The store sends one when calls queue up behind the ones in
-- flight (group-commit.ts); a call that finds the store idle goes alone, as `select eg_decide($1)`.
--
-- Each call runs exactly as it would alone, in input order: a later one sees what an earlier one
-- wrote (two proposals of one key in one batch: the first reserves it, the second is pending).
-- Their events are appended at the end, in chain order (eg_append_event queues them in the
-- transaction-local setting eg.deferred_events while eg_batch runs its calls): a batch holds the row locks of all its calls until its COMMIT, and two
-- batches that took chain head rows in call order could each wait for the other's; in chain order
-- they cannot. Every other lock a call takes follows the order of README.md within that call; two
-- batches that cross on those (the same keys, in opposite orders) are a deadlock PostgreSQL breaks
-- by failing one of them, which rolls it back whole: the store then sends its calls one by one.
-- Any error fails the whole batch the same way, so a batch never commits part of its calls.
-- `set lock_timeout = '4s'`: see eg_decide.sql.
create or replace function eg_batch(p_fn text, p_inputs text) returns json language plpgsql
set lock_timeout = '4s' as $$
  declare
    v_results json[] := '{}';
    v_fns text[];
    v_call record;
    v_op record;
    v_event record;
    v_queue text;
  begin
    v_fns := case when left(p_fn, 1) = '[' then array(select json_array_elements_text(p_fn::json))
      else array_fill(p_fn, array[json_array_length(p_inputs::json)]) end;
    if cardinality(v_fns) <> json_array_length(p_inputs::json) then
      raise exception 'effectgate: eg_batch has % functions for % inputs', cardinality(v_fns),
        json_array_length(p_inputs::json);
    end if;
    if exists (select 1 from unnest(v_fns) f where f not in ('eg_decide', 'eg_record_outcome')) then
      raise exception 'effectgate: eg_batch runs eg_decide or eg_record_outcome, not %', p_fn;
    end if;
    -- The queue: a transaction-local setting, '[' then each queued event as JSON followed by a
    -- comma (eg_append_event adds them; a value starting with '[' is what tells it to queue). Not
    -- a temp table: no DDL, no TEMP privilege needed, nothing to empty at COMMIT; a batch that
    -- fails leaves nothing behind either.
    perform set_config('eg.deferred_events', '[', true);
    -- A keyless operation's outcome always takes the general path, which brings its operation's
    -- rows up to date under the operation's lock, held until COMMIT (eg_project_operation.sql):
    -- taken here, for all of them at once and in the order of the locks' own keys (the ids'
    -- hashes, eg_lock_operation.sql), not in call order, so two batches of such outcomes never
    -- take them in opposite orders.
    for v_op in select l.id from (select distinct e.value ->> 'operationId' as id
          from json_array_elements(p_inputs::json) with ordinality as e(value, n)
          where v_fns[e.n] = 'eg_record_outcome' and e.value ->> 'keyHash' is null
            and e.value ->> 'operationId' is not null) l
        order by hashtext(l.id), l.id loop
      perform eg_lock_operation(v_op.id);
    end loop;
    for v_call in select e.value::text as input, e.ordinality as n
        from json_array_elements(p_inputs::json) with ordinality as e order by e.ordinality loop
      v_results := v_results || case v_fns[v_call.n] when 'eg_decide' then eg_decide(v_call.input)
        else eg_record_outcome(v_call.input) end;
    end loop;
    v_queue := rtrim(current_setting('eg.deferred_events'), ',') || ']';
    perform set_config('eg.deferred_events', '', true);
    for v_event in
      select q.e ->> 'chainOf' as chain_of, q.e ->> 'type' as type, q.e ->> 'operationId' as operation_id,
        q.e ->> 'payload' as payload
      from json_array_elements(v_queue::json) with ordinality as q(e, n)
      order by (q.e ->> 'chain')::int, q.n loop
      perform eg_append_event(v_event.chain_of, v_event.type, v_event.operation_id, v_event.payload);
    end loop;
    return array_to_json(v_results);
  end $$;
