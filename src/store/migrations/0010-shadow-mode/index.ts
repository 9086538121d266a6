import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0010: shadow mode (docs/design.md §2 "Shadow mode"; Smokescreen's report mode). A gate or a tool in shadow mode
 * computes every verdict as it would in enforce mode and records it, but refuses nothing: what
 * enforce mode would have answered is recorded as `would_<verdict>` and the request is sent
 * anyway, exactly as the agent wrote it.
 *
 * - decisions.verdict also takes would_duplicate, would_pending, would_hold, would_halted and
 *   would_block (eg_decided.sql writes them). An allow is an allow in both modes (it was sent and
 *   is an attempt of its operation), so the operations a tool made in shadow mode are the history
 *   it keeps recognising duplicates by when it moves to enforce.
 * - shadow_dispatches: what became of a request sent although its decision was would_<verdict>
 *   (eg_shadow_dispatched.sql), one row per such decision: it is not an attempt of the operation
 *   the verdict names (the gate did not own it: no reservation, no Idempotency-Key), but it is an
 *   effect the destination may have done, so the trail shows it beside that decision. A decision
 *   without a row was sent and the gate stopped before recording what came back.
 * - run_key_skips.shadow_skips: the loop breaker's count of would_duplicate answers, kept apart
 *   from `skips` (what a run was TOLD): a run that got the destination's 201 in shadow was never
 *   told its effect was done, so when its tool enforces, its first duplicate is a 409, not a halt
 *   (eg_skip.sql).
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'alter table decisions drop constraint decisions_verdict_check',
  `alter table decisions add constraint decisions_verdict_check check (verdict in ('allow', 'duplicate',
    'pending', 'hold', 'halted', 'block', 'would_duplicate', 'would_pending', 'would_hold', 'would_halted',
    'would_block'))`,
  // "N duplicate effects would have been skipped" per tool (Store.countShadowVerdicts): only the
  // shadow rows, which a gate in enforce mode never writes.
  `create index decisions_would_idx on decisions (tool_id, verdict, created_at) where verdict like 'would\\_%'`,
  'alter table run_key_skips add column shadow_skips int not null default 0',
  `create table shadow_dispatches (
    decision_id text primary key,
    operation_id text,
    tool_id text not null,
    run_id text not null,
    tenant text not null,
    area text not null,
    agent text not null,
    verdict text not null,
    dispatch_state text not null check (dispatch_state in ('not_sent', 'sent_no_response',
      'response_received', 'execution_error')),
    status int,
    duration_ms double precision,
    error text,
    created_at timestamptz not null default now()
  )`,
];

export const migration0010: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
