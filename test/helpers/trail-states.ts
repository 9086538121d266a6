/**
 * The trail's word against the tables': for every operation, the state changes its events state
 * (every `stateChange: { from, to }` in their facts, and a `closedOperation` that names it) must
 * chain from `open` to exactly the state its row holds. A row that changed with no event saying so,
 * or an event that says a change the row never made, is a trail that lies.
 */

import type { TrailEvent, TrailMismatch } from './trail-events.js';

/** One state change the trail tells of an operation, with the time of the transaction that made it. */
export interface StateChange {
  readonly from: string;
  readonly to: string;
  readonly where: string;
  /** The transaction's time as the event states it (ISO), or null when the event states none. */
  readonly at: string | null;
  /** Whether the event that states it is the operation's own (on its chain, in its order). */
  readonly own: boolean;
}

/**
 * The time of the transaction that wrote an event, as the event itself states it: a decision's
 * decidedAt, an outcome's finishedAt, a recovery's recoveredAt, an observation's observedAt, a
 * taken key's takenAt (operation.key_taken).
 */
export function eventTime(e: TrailEvent): string | null {
  const p = e.payload as { decision?: { decidedAt?: string }; facts?: Record<string, unknown> };
  const f = p.facts ?? {};
  const at = p.decision?.decidedAt ?? f['finishedAt'] ?? f['recoveredAt'] ?? f['observedAt'] ?? f['takenAt'];
  return typeof at === 'string' ? at : null;
}

function changesIn(
  value: unknown,
  ownOp: string | null,
  path: string,
  out: (op: string, c: { from: string; to: string; where: string }) => void,
): void {
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) changesIn(v, ownOp, `${path}[${i}]`, out);
    return;
  }
  const o = value as Record<string, unknown>;
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

/** Every operation's state changes, in the trail's order. */
export function toldStateChanges(events: readonly TrailEvent[]): Map<string, StateChange[]> {
  const told = new Map<string, StateChange[]>();
  for (const e of events) {
    const payload = e.payload as { facts?: unknown; decision?: { operationId?: string } };
    // A decision of another run about an operation (a pending, a hold) names it in its decision.
    const own = e.operationId ?? payload.decision?.operationId ?? null;
    const at = eventTime(e);
    changesIn(payload.facts, own, e.type, (op, c) => {
      const list = told.get(op) ?? [];
      list.push({ ...c, at, own: e.operationId === op });
      told.set(op, list);
    });
  }
  return told;
}

export function stateMismatches(
  ops: readonly { readonly id: string; readonly state: string }[],
  told: ReadonlyMap<string, readonly StateChange[]>,
): TrailMismatch[] {
  const out: TrailMismatch[] = [];
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
    // The projection applies to an operation's rows the events that name it, in their order
    // (eg_project_rows.sql): a change told only by another operation's event would never reach them.
    const stray = changes.find((c) => !c.own);
    if (problem === null && stray !== undefined)
      problem = `${stray.where}: told by an event that is not the operation's own (another chain)`;
    if (problem !== null) {
      out.push({
        operationId: op.id,
        problem,
        told: changes.map((c) => `${c.from}->${c.to} (${c.where})`),
      });
    }
  }
  return out;
}
