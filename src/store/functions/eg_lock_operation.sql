-- Takes operation p_op's lock until the transaction ends: every rare path that reads or writes an
-- operation's rows holds it (eg_project_operation takes it first), so two of them on one operation
-- take turns even when the operation has no key to lock (a keyless tool's outcome and an
-- operator's observation of it). Lock order: key, operation lock, operation and attempt rows.
-- An advisory lock of its own space ('egop', then the id's hash): two operations whose ids hash
-- alike only take turns for nothing.
create or replace function eg_lock_operation(p_op text) returns void language sql as $$
    select pg_advisory_xact_lock(1701277552, hashtext(p_op))
  $$;
