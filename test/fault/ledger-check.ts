/**
 * The Jepsen-style checker of the fault suite: after a run, the destination's own ledger (what
 * really happened) is compared with the gate's trail (what the gate says happened).
 *
 * Invariants (docs/design.md §2–§3):
 * 1. every key is performed at most once by the destination (a replay of an honoured
 *    Idempotency-Key is not a second effect);
 * 2. every attempt has a dispatch state (after a graceful stop, with the store back);
 * 3. every effect the destination performed belongs to an operation of the trail, of the same tool
 *    and key, that is `succeeded`, `unknown` or `duplicate_effect_confirmed`: never `failed`, never
 *    missing;
 * 4. an operation is `unknown` only where one of its attempts is `sent_no_response`, and (strict
 *    mode) only where the destination did not answer it: where the gate got the answer it knew;
 * 5. the destination never saw more requests of an operation than the trail has sent attempts, and
 *    every `succeeded` operation was performed by the destination;
 * 6. the hash chain verifies.
 *
 * `readTrail` reads the store; `checkLedger` is pure, so the checker itself is tested on planted
 * violations (test/fault/ledger-check.test.ts).
 */
import { type AuditReport, verifyStoreChain } from '../../src/store/index.js';
import type { ApprovalRecord, OperationRecord, Store } from '../../src/store/types.js';
import type { Arrival, LedgerEntry } from './ledger-destination.js';

export interface TrailSnapshot {
  readonly operations: readonly OperationRecord[];
  readonly approvals: readonly ApprovalRecord[];
  readonly chain: AuditReport;
}

/** Far above any run of the suite (the long variant proposes 3 000 keys): nothing is cut off. */
const READ_LIMIT = 1_000_000;

export async function readTrail(
  store: Pick<Store, 'listOperations' | 'listApprovals' | 'readEvents' | 'chainHeads'>,
): Promise<TrailSnapshot> {
  const operations = await store.listOperations({ limit: READ_LIMIT });
  const approvals = await store.listApprovals({ limit: READ_LIMIT });
  const chain = await verifyStoreChain(store);
  return { operations, approvals, chain };
}

export interface LedgerCheckInput {
  readonly ledger: readonly LedgerEntry[];
  readonly arrivals: readonly Pick<Arrival, 'collection' | 'order' | 'idempotencyKey' | 'behaviour'>[];
  readonly trail: TrailSnapshot;
  /** Destination collection → tool id (`honored` → `fault.honored`). */
  readonly toolOf: (collection: string) => string;
  /** Keys the test proposed (for the figures); default: every key seen in the ledger or trail. */
  readonly proposedKeys?: number;
  /**
   * Invariant 4, strict: an operation the destination answered (the gate had the answer) must not
   * be left `unknown`. Off where the gate that had the answer was killed before it could write it.
   */
  readonly strictUnknown?: boolean;
}

export interface LedgerFigures {
  readonly keys: number;
  /** Keys the destination performed at least once. */
  readonly performed: number;
  /** Keys the destination performed more than once. */
  readonly performedTwice: number;
  /** Effects performed in all (replays excluded). */
  readonly effects: number;
  readonly replays: number;
  readonly operations: number;
  readonly attempts: number;
  /** Operations with an approval request (a `hold`, or recovery of a held tool). */
  readonly holds: number;
  /** Operations in state `unknown`. */
  readonly unknowns: number;
  readonly attemptsWithoutOutcome: number;
  readonly chainVerifies: boolean;
}

export interface LedgerCheck {
  readonly figures: LedgerFigures;
  /** One line per broken invariant, with up to five examples each; empty when all hold. */
  readonly violations: readonly string[];
}

const EXAMPLES = 5;
const SETTLED_BY_EFFECT = new Set(['succeeded', 'unknown', 'duplicate_effect_confirmed']);

export function checkLedger(input: LedgerCheckInput): LedgerCheck {
  const { ledger, arrivals, trail, toolOf } = input;
  const violations: string[] = [];
  const report = (what: string, examples: readonly string[], total = examples.length): void => {
    if (total === 0) return;
    const more = total > EXAMPLES ? ` (+${total - EXAMPLES} more)` : '';
    violations.push(`${what}: ${total} — ${examples.slice(0, EXAMPLES).join('; ')}${more}`);
  };
  const keyOf = (tool: string, order: unknown): string => `${tool} ${JSON.stringify(order)}`;

  const byId = new Map<string, OperationRecord>();
  const keys = new Set<string>();
  for (const op of trail.operations) {
    byId.set(op.id, op);
    keys.add(keyOf(op.toolId, op.keyValues?.[0] ?? null));
  }

  // 1. At most one performed effect per key.
  const performedBy = new Map<string, LedgerEntry[]>();
  for (const e of ledger) {
    const k = keyOf(toolOf(e.collection), e.order);
    keys.add(k);
    if (e.replayed) continue;
    performedBy.set(k, [...(performedBy.get(k) ?? []), e]);
  }
  const doubled = [...performedBy.entries()].filter(([, list]) => list.length > 1);
  report(
    'keys performed twice by the destination',
    doubled.map(
      ([k, list]) =>
        `${k} ×${list.length} (Idempotency-Key ${list.map((e) => e.idempotencyKey ?? 'none').join(', ')})`,
    ),
  );

  // 2. Every attempt has an outcome.
  const withoutOutcome = trail.operations.flatMap((op) =>
    op.attempts
      .filter((a) => a.dispatchState === null)
      .map((a) => `${op.toolId} ${op.id} attempt ${a.number}`),
  );
  report('attempts without an outcome', withoutOutcome);

  // 3. Every performed effect has its operation, of the same key, in a state an effect allows.
  const orphan: string[] = [];
  const wrongState: string[] = [];
  for (const e of ledger) {
    if (e.replayed) continue;
    const tool = toolOf(e.collection);
    const op = e.idempotencyKey === null ? undefined : byId.get(e.idempotencyKey);
    if (
      op === undefined ||
      op.toolId !== tool ||
      JSON.stringify(op.keyValues) !== JSON.stringify([e.order])
    ) {
      orphan.push(
        `${keyOf(tool, e.order)} effect ${e.effectId} (Idempotency-Key ${e.idempotencyKey ?? 'none'})`,
      );
    } else if (!SETTLED_BY_EFFECT.has(op.state)) {
      wrongState.push(`${keyOf(tool, e.order)} operation ${op.id} is ${op.state}`);
    }
  }
  report('effects without their operation in the trail', orphan);
  report('performed effects whose operation is neither succeeded nor unknown', wrongState);

  // 4. Unknown only where the gate could not know.
  const answeredOps = new Set<string>();
  const ledgerOps = new Map<string, number>();
  for (const e of ledger) {
    if (e.idempotencyKey === null) continue;
    ledgerOps.set(e.idempotencyKey, (ledgerOps.get(e.idempotencyKey) ?? 0) + 1);
    if (e.answered) answeredOps.add(e.idempotencyKey);
  }
  const unknowns = trail.operations.filter((op) => op.state === 'unknown');
  report(
    'unknown operations without an attempt sent_no_response',
    unknowns
      .filter((op) => !op.attempts.some((a) => a.dispatchState === 'sent_no_response'))
      .map((op) => `${keyOf(op.toolId, op.keyValues?.[0])} ${op.id} attempts [${attemptStates(op)}]`),
  );
  if (input.strictUnknown === true) {
    report(
      'unknown operations the destination answered (the gate had the answer)',
      unknowns
        .filter((op) => answeredOps.has(op.id) && !arrivalsOf(arrivals, op.id).some(unanswerable))
        .map((op) => `${keyOf(op.toolId, op.keyValues?.[0])} ${op.id} attempts [${attemptStates(op)}]`),
    );
  }

  // 5. The trail agrees with the destination, request by request.
  const arrivalCount = new Map<string, number>();
  for (const a of arrivals) {
    if (a.idempotencyKey !== null)
      arrivalCount.set(a.idempotencyKey, (arrivalCount.get(a.idempotencyKey) ?? 0) + 1);
  }
  const unrecorded: string[] = [];
  for (const [id, n] of arrivalCount) {
    const op = byId.get(id);
    const sent = op?.attempts.filter((a) => a.dispatchState !== 'not_sent').length ?? 0;
    if (n > sent)
      unrecorded.push(`operation ${id}: ${n} request(s) at the destination, ${sent} sent attempt(s)`);
  }
  report('requests the destination received that the trail does not know', unrecorded);
  report(
    'succeeded operations the destination never performed',
    trail.operations
      .filter((op) => op.state === 'succeeded' && (ledgerOps.get(op.id) ?? 0) === 0)
      .map((op) => `${keyOf(op.toolId, op.keyValues?.[0])} ${op.id}`),
  );

  // 6. The chain verifies.
  if (!trail.chain.ok) {
    const bad = trail.chain.firstBad;
    violations.push(
      `audit chain does not verify: ${bad === undefined ? 'broken' : `chain ${bad.chain} seq ${bad.seq}: ${bad.reason}`}`,
    );
  }

  const holds = new Set(trail.approvals.map((a) => a.operationId));
  const effects = ledger.filter((e) => !e.replayed).length;
  return {
    figures: {
      keys: input.proposedKeys ?? keys.size,
      performed: performedBy.size,
      performedTwice: doubled.length,
      effects,
      replays: ledger.length - effects,
      operations: trail.operations.length,
      attempts: trail.operations.reduce((n, op) => n + op.attempts.length, 0),
      holds: holds.size,
      unknowns: unknowns.length,
      attemptsWithoutOutcome: withoutOutcome.length,
      chainVerifies: trail.chain.ok,
    },
    violations,
  };
}

/** `sent_no_response, response_received 201`: an operation's attempts as the violation lines show them. */
function attemptStates(op: OperationRecord): string {
  return op.attempts
    .map(
      (a) =>
        `${a.dispatchState ?? 'none'}${a.status === null || a.status === undefined ? '' : ` ${a.status}`}${a.retryDecision ? ` (${a.retryDecision})` : ''}`,
    )
    .join(', ');
}

function arrivalsOf(
  arrivals: LedgerCheckInput['arrivals'],
  operationId: string,
): LedgerCheckInput['arrivals'] {
  return arrivals.filter((a) => a.idempotencyKey === operationId);
}

/** A request the destination deliberately left without an answer: there the gate cannot know. */
function unanswerable(a: Pick<Arrival, 'behaviour'>): boolean {
  return a.behaviour !== 'ok' && a.behaviour !== 'hold';
}

/** One line for the test log: the figures a run is judged by. */
export function formatFigures(label: string, f: LedgerFigures): string {
  return `${label}: keys ${f.keys}, performed ${f.performed}, performed twice ${f.performedTwice}, effects ${f.effects}, replays ${f.replays}, operations ${f.operations}, attempts ${f.attempts}, holds ${f.holds}, unknowns ${f.unknowns}, attempts without outcome ${f.attemptsWithoutOutcome}, chain ${f.chainVerifies ? 'verifies' : 'BROKEN'}`;
}
