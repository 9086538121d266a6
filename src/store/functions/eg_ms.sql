-- A JSON number of milliseconds as an interval; null for anything else (an absent option).
create or replace function eg_ms(p_ms jsonb) returns interval language sql immutable as $$
    select case when jsonb_typeof(p_ms) = 'number'
      then (p_ms::text)::double precision * interval '1 millisecond' end
  $$;
