/**
 * The operation and attempt rows made again from the events alone, and compared with the rows the
 * store wrote, column by column. The store's plan is for these rows to become projections of the
 * events (src/store/README.md, "Next"); that is only possible if the events carry every fact a row
 * holds. Every test store holds its trail to this on close (trail-check.ts), so an event that
 * stops saying something a row records fails whatever suite it happens in.
 *
 * What writes each column, as the store's functions do:
 * - an allow (decision.allow) opens the operation (facts.operation.opened) and always its attempt:
 *   the proposal (input) and the facts the store chose (facts.attempt), dated decidedAt;
 * - an outcome (attempt.outcome): the input's outcome columns, at facts.finishedAt, and the
 *   kept answer when the operation was kept unknown (facts.keptUnknown);
 * - a lost outcome found by a proposal (facts.outcomeLost of its decision, or of the
 *   operation.key_taken event when the proposal opened another operation) or a recovery
 *   (attempt.recovered, at facts.recoveredAt): sent_no_response with the error they state;
 * - every state change, wherever it is stated: the operation's state, and its updated_at at the
 *   time of the event that stated it.
 */

import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { TrailEvent, TrailMismatch } from './trail-events.js';
import { eventTime, type StateChange } from './trail-states.js';

type Row = Record<string, unknown>;

/** Microseconds since the epoch, as text, of an ISO time with up to six fractional digits. */
export function isoMicros(iso: string): string {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?(Z|[+-]\d\d(?::?\d\d)?)$/.exec(iso);
  if (m === null) throw new Error(`not an ISO time: ${iso}`);
  const zone = m[3] === 'Z' || m[3]!.length > 3 ? m[3]! : `${m[3]}:00`;
  const seconds = BigInt(Date.parse(`${m[1]}${zone}`)) * 1000n;
  return (seconds + BigInt((m[2] ?? '').padEnd(6, '0'))).toString();
}

function micros(iso: unknown): string | null {
  return typeof iso === 'string' ? isoMicros(iso) : null;
}

function plusMillis(us: string | null, ms: unknown): string | null {
  return us === null || typeof ms !== 'number'
    ? null
    : (BigInt(us) + BigInt(Math.round(ms * 1000))).toString();
}

function str(v: unknown): string | null {
  return v === undefined || v === null ? null : String(v);
}

/** Object keys sorted, so jsonb read back and JSON parsed from an event compare as values. */
function canon(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canon);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, canon((v as Row)[k])]),
    );
  }
  return v;
}

interface Rebuilt {
  readonly operations: Map<string, Row>;
  readonly attempts: Map<string, Row>;
  /** Attempts marked lost by an event that is not their operation's own (on another chain). */
  readonly strayLost: { operationId: string; type: string }[];
}

function openFromAllow(e: TrailEvent, out: Rebuilt): void {
  const input = e.payload['input'] as Row;
  const decision = e.payload['decision'] as Row;
  const facts = e.payload['facts'] as Row;
  const opFacts = (facts['operation'] ?? {}) as Row;
  const att = facts['attempt'] as Row;
  const scope = input['scope'] as Row;
  const key = (input['key'] ?? null) as Row | null;
  const at = micros(decision['decidedAt']);
  const operationId = String(decision['operationId']);
  const keyHash = str(decision['keyHash']);
  if (opFacts['opened'] === true) {
    out.operations.set(operationId, {
      id: operationId,
      tool_id: str(input['toolId']),
      tenant: str(scope['tenant']),
      area: str(scope['area']),
      agent: str(scope['agent']),
      key_hash: keyHash,
      key_values: keyHash === null ? null : canon(key?.['values'] ?? null),
      idempotency_header: str(input['idempotencyHeader']),
      run_id: str(input['runId']),
      step: str(input['step']),
      worker: str(input['worker']),
      agent_version: str(input['agentVersion']),
      created_at: at,
      supersedes_operation_id: str(opFacts['supersedesOperationId']),
      unknown_rule: str(input['unknownRule']),
      window_ms:
        keyHash === null || typeof key?.['windowMs'] !== 'number'
          ? null
          : String(Math.round(key['windowMs'])),
    });
  }
  const idem = (input['idempotency'] ?? null) as Row | null;
  const agentKey = str(idem?.['agentKey']);
  out.attempts.set(String(decision['attemptId']), {
    id: str(decision['attemptId']),
    operation_id: operationId,
    number: att['number'],
    decision_id: str(input['decisionId']),
    run_id: str(input['runId']),
    step: str(input['step']),
    worker: str(input['worker']),
    retry_of_attempt_id: str(att['retryOfAttemptId']),
    retry_reason: str(att['retryReason']),
    retry_decision: str(att['retryDecision']),
    remaining_attempts: att['remainingAttempts'] ?? null,
    request: canon(input['request'] ?? null),
    gate_instance: str(input['gateInstance']),
    started_at: at,
    deadline_at: plusMillis(at, input['deadlineMs']),
    idempotency_key: str(att['idempotencyKey']),
    agent_idempotency_key: agentKey === null ? null : [...agentKey].slice(0, 255).join(''),
    gate_idempotency_key: str(att['gateIdempotencyKey']),
    dispatch_state: null,
    status: null,
    response_fingerprint: null,
    destination_ref: null,
    replayed: null,
    duration_ms: null,
    error: null,
    finished_at: null,
    recovered_at: null,
    outcome_rule: null,
    error_code: null,
    kept_state: null,
  });
}

function markLost(attempt: Row | undefined, error: unknown, at: string | null): void {
  if (attempt === undefined) return;
  attempt['dispatch_state'] = 'sent_no_response';
  attempt['error'] = str(error);
  attempt['recovered_at'] = at;
}

function settle(e: TrailEvent, out: Rebuilt): void {
  const input = e.payload['input'] as Row;
  const facts = e.payload['facts'] as Row;
  const attempt = out.attempts.get(String(input['attemptId']));
  if (attempt === undefined) return;
  Object.assign(attempt, {
    dispatch_state: str(input['dispatchState']),
    status: input['status'] === undefined || input['status'] === null ? null : Number(input['status']),
    response_fingerprint: str(input['responseFingerprint']),
    destination_ref: str(input['destinationRef']),
    replayed: typeof input['replayed'] === 'boolean' ? input['replayed'] : null,
    duration_ms: typeof input['durationMs'] === 'number' ? input['durationMs'] : null,
    error: str(input['error']),
    outcome_rule: str(input['outcomeRule']),
    error_code: str(input['errorCode']),
    kept_state: facts['keptUnknown'] === true ? str(input['operationState']) : null,
    finished_at: micros(facts['finishedAt']),
  });
}

/** The operation and attempt rows the events make, in the trail's order. */
export function rowsFromEvents(
  events: readonly TrailEvent[],
  told: ReadonlyMap<string, readonly StateChange[]>,
): Rebuilt {
  const out: Rebuilt = { operations: new Map(), attempts: new Map(), strayLost: [] };
  for (const e of events) {
    const decision = e.payload['decision'] as Row | undefined;
    const facts = (e.payload['facts'] ?? {}) as Row;
    // A lost outcome found on the way came before the decision that found it.
    const lost = facts['outcomeLost'] as Row | null | undefined;
    if (lost?.['marked'] === true && lost['alreadyMarked'] !== true) {
      const attempt = out.attempts.get(String(lost['attemptId']));
      // The projection applies to an operation's rows the events that name it (eg_project_rows.sql):
      // the marking must be told by an event of the operation itself.
      const operationId = str(attempt?.['operation_id']);
      if (operationId !== null && operationId !== e.operationId)
        out.strayLost.push({ operationId, type: e.type });
      markLost(attempt, lost['error'], micros(eventTime(e)));
    }
    if (e.type === 'decision.allow' && decision?.['attemptId']) openFromAllow(e, out);
    else if (e.type === 'attempt.outcome') settle(e, out);
    else if (e.type === 'attempt.recovered') {
      const input = e.payload['input'] as Row;
      markLost(out.attempts.get(String(input['attemptId'])), facts['error'], micros(facts['recoveredAt']));
    }
  }
  for (const [id, op] of out.operations) {
    const changes = told.get(id) ?? [];
    const last = changes.at(-1);
    op['state'] = last?.to ?? 'open';
    op['updated_at'] = last === undefined ? op['created_at'] : micros(last.at);
  }
  return out;
}

const OPERATION_COLUMNS = sql`id, tool_id, tenant, area, agent, state, key_hash, key_values, idempotency_header,
  run_id, step, worker, agent_version, supersedes_operation_id, unknown_rule, window_ms::text as window_ms,
  (extract(epoch from created_at) * 1000000)::bigint::text as created_at,
  (extract(epoch from updated_at) * 1000000)::bigint::text as updated_at`;

const ATTEMPT_COLUMNS = sql`id, operation_id, number, decision_id, run_id, step, worker, dispatch_state,
  retry_of_attempt_id, retry_reason, request, status, response_fingerprint, destination_ref, replayed,
  duration_ms, error, retry_decision, remaining_attempts, gate_instance, outcome_rule, error_code,
  idempotency_key, agent_idempotency_key, gate_idempotency_key, kept_state,
  (extract(epoch from started_at) * 1000000)::bigint::text as started_at,
  (extract(epoch from finished_at) * 1000000)::bigint::text as finished_at,
  (extract(epoch from deadline_at) * 1000000)::bigint::text as deadline_at,
  (extract(epoch from recovered_at) * 1000000)::bigint::text as recovered_at`;

function differences(what: string, row: Row, made: Row | undefined): string[] {
  if (made === undefined) return [`${what}: no event made it`];
  const out: string[] = [];
  for (const [column, value] of Object.entries(row)) {
    const a = JSON.stringify(canon(value));
    const b = JSON.stringify(made[column] ?? null);
    if (a !== b) out.push(`${what}.${column}: the row says ${a}, the events say ${b}`);
  }
  return out;
}

/** Every column where a row and the row its events make disagree, and rows on only one side. */
export async function rowMismatches(
  // biome-ignore lint/suspicious/noExplicitAny: any database shape
  db: Kysely<any>,
  rebuilt: Rebuilt,
): Promise<TrailMismatch[]> {
  const ops = (await sql<Row>`select ${OPERATION_COLUMNS} from operations`.execute(db)).rows;
  const attempts = (await sql<Row>`select ${ATTEMPT_COLUMNS} from attempts`.execute(db)).rows;
  const out: TrailMismatch[] = [];
  const report = (operationId: string, problems: string[]): void => {
    for (const problem of problems) out.push({ operationId, problem, told: [] });
  };
  for (const op of ops)
    report(String(op['id']), differences('operation', op, rebuilt.operations.get(String(op['id']))));
  for (const a of attempts) {
    report(
      String(a['operation_id']),
      differences(`attempt ${a['number']}`, a, rebuilt.attempts.get(String(a['id']))),
    );
  }
  const have = new Set([...ops, ...attempts].map((r) => String(r['id'])));
  for (const id of rebuilt.operations.keys())
    if (!have.has(id)) report(id, ['the events open it, no row holds it']);
  for (const [id, a] of rebuilt.attempts) {
    if (!have.has(id))
      report(String(a['operation_id']), [`attempt ${id}: the events open it, no row holds it`]);
  }
  for (const { operationId, type } of rebuilt.strayLost)
    report(operationId, [`a ${type} event of another operation marks its attempt lost (another chain)`]);
  return out;
}
