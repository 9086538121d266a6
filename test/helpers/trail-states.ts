/**
 * The trail's word against the tables': for every operation, the state changes its events state
 * (every `stateChange: { from, to }` in their facts, and a `closedOperation` that names it) must
 * chain from `open` to exactly the state its row holds. A row that changed with no event saying so,
 * or an event that says a change the row never made, is a trail that lies. The same holds for
 * each attempt's dispatch state and status (trailAttemptMismatches).
 */

import type { Kysely } from 'kysely';
import { sql } from 'kysely';

export interface TrailStateMismatch {
  readonly operationId: string;
  readonly rowState: string;
  readonly told: readonly string[];
  readonly problem: string;
}

/** A store a test left unmigrated (or half-migrated on purpose) has no tables to hold to a trail. */
// biome-ignore lint/suspicious/noExplicitAny: any database shape
async function migrated(db: Kysely<any>): Promise<boolean> {
  const { rows } = await sql<{ ok: boolean }>`
    select to_regclass('operations') is not null and to_regclass('attempts') is not null
       and to_regclass('events') is not null as ok`.execute(db);
  return rows[0]?.ok === true;
}

interface Change {
  readonly from: string;
  readonly to: string;
  readonly where: string;
}

function changesIn(
  value: unknown,
  ownOp: string | null,
  path: string,
  out: (op: string, c: Change) => void,
): void {
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) changesIn(v, ownOp, `${path}[${i}]`, out);
    return;
  }
  const o = value as Record<string, unknown>;
  // An object that names another operation (closedOperation) speaks for that one.
  // An object that names another operation beside its stateChange speaks for that one: a
  // closedOperation ({ id }), an outcomeLost found on the way to a new operation ({ operationId }).
  const named = 'stateChange' in o ? (o['operationId'] ?? o['id']) : undefined;
  const op = typeof named === 'string' ? named : ownOp;
  // A lost outcome found on the way (outcomeLost: an expired reservation marked unknown) happened
  // before the rest of the decision that found it.
  const entries = Object.entries(o).sort(
    ([a], [b]) => Number(b === 'outcomeLost') - Number(a === 'outcomeLost'),
  );
  for (const [k, v] of entries) {
    if (k === 'stateChange' && v !== null && typeof v === 'object') {
      const c = v as { from?: unknown; to?: unknown };
      if (op !== null) out(op, { from: String(c.from), to: String(c.to), where: `${path}.${k}` });
    } else if (k !== 'input') {
      changesIn(v, op, `${path}.${k}`, out);
    }
  }
}

// biome-ignore lint/suspicious/noExplicitAny: any database shape
export async function trailStateMismatches(db: Kysely<any>): Promise<TrailStateMismatch[]> {
  if (!(await migrated(db))) return [];
  const ops = (await sql<{ id: string; state: string }>`select id, state from operations`.execute(db)).rows;
  const events = (
    await sql<{ type: string; operation_id: string | null; payload: string }>`
      select type, operation_id, payload from events order by recorded_at_us, chain, seq`.execute(db)
  ).rows;
  const told = new Map<string, Change[]>();
  for (const e of events) {
    const payload = JSON.parse(e.payload) as { facts?: unknown; decision?: { operationId?: string } };
    // A decision of another run about an operation (a pending, a hold) names it in its decision.
    const own = e.operation_id ?? payload.decision?.operationId ?? null;
    changesIn(payload.facts, own, `${e.type}`, (op, c) => {
      const list = told.get(op) ?? [];
      list.push(c);
      told.set(op, list);
    });
  }
  const out: TrailStateMismatch[] = [];
  for (const op of ops) {
    const changes = told.get(op.id) ?? [];
    let state = 'open';
    let problem: string | null = null;
    for (const c of changes) {
      if (c.from !== state && problem === null)
        problem = `${c.where}: from ${c.from}, but the trail had it ${state}`;
      state = c.to;
    }
    if (problem === null && state !== op.state)
      problem = `the trail ends at ${state}, the row says ${op.state}`;
    if (problem !== null) {
      out.push({
        operationId: op.id,
        rowState: op.state,
        told: changes.map((c) => `${c.from}->${c.to} (${c.where})`),
        problem,
      });
    }
  }
  return out;
}

/**
 * The same for attempts: each attempt row was opened by an allow that names it, and its dispatch
 * state and status are the last ones its events told (an outcome; a recovery or an expired
 * reservation marking it sent_no_response); an attempt no event settled has none.
 */
// biome-ignore lint/suspicious/noExplicitAny: any database shape
export async function trailAttemptMismatches(db: Kysely<any>): Promise<TrailStateMismatch[]> {
  if (!(await migrated(db))) return [];
  const attempts = (
    await sql<{ id: string; operation_id: string; dispatch_state: string | null; status: number | null }>`
      select id, operation_id, dispatch_state, status from attempts`.execute(db)
  ).rows;
  const events = (
    await sql<{ type: string; payload: string }>`
      select type, payload from events order by recorded_at_us, chain, seq`.execute(db)
  ).rows;
  const opened = new Set<string>();
  const told = new Map<string, string[]>();
  const tell = (id: string, what: string): void => {
    const list = told.get(id) ?? [];
    list.push(what);
    told.set(id, list);
  };
  for (const e of events) {
    const p = JSON.parse(e.payload) as {
      input?: { attemptId?: string; dispatchState?: string; status?: number | null };
      decision?: { verdict?: string; attemptId?: string | null };
      facts?: { outcomeLost?: { marked?: boolean; alreadyMarked?: boolean; attemptId?: string } };
    };
    // A lost outcome found on the way comes first, as in trailStateMismatches.
    const lost = p.facts?.outcomeLost;
    if (lost?.marked && !lost.alreadyMarked && lost.attemptId) tell(lost.attemptId, 'sent_no_response null');
    if (e.type.startsWith('decision.') && p.decision?.attemptId && /allow$/.test(e.type))
      opened.add(p.decision.attemptId);
    if (e.type === 'attempt.outcome' && p.input?.attemptId) {
      tell(p.input.attemptId, `${p.input.dispatchState} ${p.input.status ?? null}`);
    }
    if (e.type === 'attempt.recovered' && p.input?.attemptId)
      tell(p.input.attemptId, 'sent_no_response null');
  }
  const out: TrailStateMismatch[] = [];
  for (const a of attempts) {
    const list = told.get(a.id) ?? [];
    const last = list.at(-1) ?? null;
    const row = a.dispatch_state === null ? null : `${a.dispatch_state} ${a.status}`;
    let problem: string | null = null;
    if (!opened.has(a.id)) problem = `attempt ${a.id}: no allow names it`;
    else if (last !== row)
      problem = `attempt ${a.id}: the trail ends at ${last ?? 'no outcome'}, the row says ${row ?? 'no outcome'}`;
    if (problem !== null)
      out.push({ operationId: a.operation_id, rowState: row ?? 'no outcome', told: list, problem });
  }
  return out;
}
