/**
 * The catalogue of fault cases: what each injects and what it promises. The test
 * files title their cases from it and write one result row per (case, store) to
 * test-artifacts/fault-results/; scripts/reliability.ts turns the rows into docs/RELIABILITY.md,
 * listing a catalogue entry that produced no row as "not run" instead of dropping it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { LedgerFigures } from './ledger-check.js';

export type StoreKind = 'pglite' | 'postgres';

export interface FaultCase {
  readonly id: string;
  readonly fault: string;
  readonly promise: string;
  readonly stores: readonly StoreKind[];
  /** Why a store is not covered (shown in the report), e.g. the relay needs a socket. */
  readonly notOn?: string;
}

const RELAY_ONLY = 'PGlite is embedded in the gate process: there is no connection to cut';

export const FAULT_CASES: readonly FaultCase[] = [
  {
    id: 'no-fault',
    fault: 'none (harness sanity: 2–3 runs per key, 8 agents)',
    promise: 'no key performed twice; every attempt has an outcome; the trail agrees with the ledger',
    stores: ['pglite', 'postgres'],
  },
  {
    id: 'down-before-decide',
    fault: 'store down before decide',
    promise: '503, nothing sent; once the store is back the same key is performed once',
    stores: ['postgres'],
    notOn: RELAY_ONLY,
  },
  {
    id: 'decide-reply-lost',
    fault: 'decide commits, its reply is cut (store down 500 ms)',
    promise: '503, nothing sent; no attempt left without an outcome after a graceful stop',
    stores: ['postgres'],
    notOn: RELAY_ONLY,
  },
  {
    id: 'down-at-destination',
    fault: 'store down 1.5 s while the call is at the destination (past pending_ttl)',
    promise:
      'the agent gets the 201; the outcome is recorded once the store is back; the next proposal is 409 duplicate',
    stores: ['postgres'],
    notOn: RELAY_ONLY,
  },
  {
    id: 'down-past-ttl-gate-killed',
    fault: 'store down past pending_ttl while the outcome is due, then the gate is SIGKILLed',
    promise:
      'the next proposal (another gate) is never a second effect: hold, same Idempotency-Key, or lookup',
    stores: ['postgres'],
    notOn: RELAY_ONLY,
  },
  {
    id: 'cut-at-record-outcome',
    fault: 'recordOutcome never reaches the store (cut, down 1 s)',
    promise:
      'the agent gets the 201; the outcome is recorded once the store is back; the next proposal is 409 duplicate',
    stores: ['postgres'],
    notOn: RELAY_ONLY,
  },
  {
    id: 'record-outcome-reply-lost',
    fault: 'recordOutcome commits, its reply is cut (down 1 s)',
    promise: 'the agent gets the 201; the outcome is recorded once; the next proposal is 409 duplicate',
    stores: ['postgres'],
    notOn: RELAY_ONLY,
  },
  {
    id: 'batch-decide-reply-lost',
    fault: 'a group-commit batch of decides commits, its reply is cut (store down 500 ms), 6 agents at once',
    promise:
      'every call of the batch 503, none sent; the others performed once; no attempt left without an outcome after a graceful stop',
    stores: ['postgres'],
    notOn: RELAY_ONLY,
  },
  {
    id: 'batch-outcome-reply-lost',
    fault: 'a group-commit batch of outcomes commits, its reply is cut (down 1 s), 6 agents at once',
    promise: 'every agent gets its 201; each outcome is recorded once; every next proposal is 409 duplicate',
    stores: ['postgres'],
    notOn: RELAY_ONLY,
  },
  {
    id: 'batch-mixed-reply-lost',
    fault:
      'a group-commit batch that carries outcomes of some calls and proposals of others commits, its reply is cut (down 1 s), 16 agents at once',
    promise:
      'every agent whose call reached the destination gets its 201 and its outcome is recorded once; every proposal of the batch 503, none sent; each key performed at most once; every next proposal of a performed key is 409 duplicate',
    stores: ['postgres'],
    notOn: RELAY_ONLY,
  },
  {
    id: 'outcome-lock-timeout',
    fault:
      "recordOutcome meets a lock held past its lock_timeout (55P03, as behind a migration's CREATE INDEX)",
    promise:
      'the agent gets the 201; the outbox writes the outcome again and it lands once the lock is gone; the next proposal is 409 duplicate',
    stores: ['postgres'],
    notOn: 'PGlite has one connection: no other transaction can hold a lock against the gate',
  },
  ...[50, 100, 250].map(
    (ms): FaultCase => ({
      id: `flapping-${ms}ms`,
      fault: `store flapping every ${ms} ms under 16 concurrent agents, 2–3 runs per key with retries`,
      promise:
        'zero keys performed twice; zero attempts without an outcome after a graceful stop; the trail agrees with the ledger',
      stores: ['postgres'],
      notOn: RELAY_ONLY,
    }),
  ),
  {
    id: 'sigkill-restart',
    fault:
      'gate SIGKILLed with calls in flight at the destination, restarted at once with the same --instance-id',
    promise:
      'the next proposal is never a second effect: 428 hold (plain), same Idempotency-Key (honored), lookup (reconcile)',
    stores: ['pglite', 'postgres'],
  },
  {
    id: 'commit-and-drop',
    fault: 'the destination performs the effect and drops the connection',
    promise: 'attempt sent_no_response, operation unknown; the next proposal is never a second effect',
    stores: ['pglite', 'postgres'],
  },
];

export function faultCase(id: string): FaultCase {
  const c = FAULT_CASES.find((x) => x.id === id);
  if (c === undefined) throw new Error(`no fault case ${id}`);
  return c;
}

/** `EFFECTGATE_FAULTS=long`: the long variant (more keys, longer flapping, every flap rate). */
export const LONG_VARIANT = process.env['EFFECTGATE_FAULTS'] === 'long';

export interface FaultResult {
  readonly case: string;
  readonly store: StoreKind;
  readonly variant: 'short' | 'long';
  readonly fault: string;
  readonly promise: string;
  readonly figures: LedgerFigures;
  /** Answers the agents got, by status (`201`, `409`, `503`, `error`, …). */
  readonly answers: Readonly<Record<string, number>>;
  readonly result: 'pass' | 'fail';
  /** Every broken promise, one line each. */
  readonly failures: readonly string[];
  readonly durationMs: number;
  readonly finishedAt: string;
}

export const RESULTS_DIR = fileURLToPath(new URL('../../test-artifacts/fault-results/', import.meta.url));

/** One file per (case, store): test files run in parallel workers and never share a file. */
export function writeFaultResult(result: FaultResult): void {
  mkdirSync(RESULTS_DIR, { recursive: true });
  writeFileSync(`${RESULTS_DIR}${result.case}--${result.store}.json`, `${JSON.stringify(result, null, 2)}\n`);
}
