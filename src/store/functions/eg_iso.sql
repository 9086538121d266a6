-- A timestamp as text: the same shape and precision (ms) as JavaScript's Date#toISOString().
create or replace function eg_iso(p_at timestamptz) returns text language sql stable as $$
    select to_char(p_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  $$;
