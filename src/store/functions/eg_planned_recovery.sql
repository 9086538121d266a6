-- What approving a held retry will do, in words, for the approval card.
create or replace function eg_planned_recovery(p_op operations, p_prev attempts) returns text language sql stable as $$
    select format('One more attempt (#%s) of operation %s after attempt #%s ended %s%s. ',
        coalesce(p_prev.number, 0) + 1, p_op.id, coalesce(p_prev.number, 0),
        coalesce(p_prev.dispatch_state, 'without a recorded outcome'),
        case when p_prev.status is not null then format(' (status %s)', p_prev.status) else '' end) ||
      case when p_op.idempotency_header is not null
        then format('It will carry the same %s: %s, but the destination is not declared to honor it (or has forgotten the key: idempotency.retention), so it may repeat the effect if the first attempt reached it.',
          p_op.idempotency_header, coalesce(p_prev.idempotency_key, p_op.id))
        else 'It carries no idempotency key: if the first attempt reached the destination, the effect will happen twice.' end
  $$;
