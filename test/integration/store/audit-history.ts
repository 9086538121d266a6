import { storeEvents } from '../../../src/store/store-events.js';
import type { ChainedEvent, Store } from '../../../src/store/types.js';
import { type Allow, block, expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

/** A little history for the audit suites, and what it appended. */
export interface AuditHistory {
  /** An operation failed twice and retried: six events on its one chain. */
  readonly retried: Allow;
  /** Events appended by each call, in call order. */
  readonly perCall: readonly number[];
}

export async function allEvents(store: Pick<Store, 'readEvents'>): Promise<ChainedEvent[]> {
  const events: ChainedEvent[] = [];
  // A small page, so paging across chains is exercised.
  for await (const e of storeEvents(store, { pageSize: 7 })) events.push(e);
  return events;
}

export async function eventCount(store: Pick<Store, 'chainHeads'>): Promise<number> {
  return (await store.chainHeads()).reduce((n, h) => n + h.lastSeq, 0);
}

/** `n` allows with their outcomes, one after another: two events each. */
export async function allows(store: Store, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const key = newKey();
    const d = (await store.decide(reserve(newRun(), key))) as Allow;
    await store.recordOutcome(outcome(d, key, 'succeeded'));
  }
}

export const payloadOf = (e: ChainedEvent): Record<string, unknown> =>
  JSON.parse(e.payload) as Record<string, unknown>;

/**
 * Allow + confirm, a duplicate, failures and their retries, a block, an unknown outcome and the
 * held retry after it, pending proposals on a held key (one recorded, one not), a looping run halted.
 */
export async function writeHistory(store: Store): Promise<AuditHistory> {
  const perCall: number[] = [];
  async function counted<T>(call: () => Promise<T>): Promise<T> {
    const before = await eventCount(store);
    const result = await call();
    perCall.push((await eventCount(store)) - before);
    return result;
  }
  const key = newKey();
  const a = await counted(() => store.decide(reserve(newRun(), key)));
  expectVerdict(a, 'allow');
  await counted(() => store.recordOutcome(outcome(a, key, 'succeeded')));
  await counted(() => store.decide(reserve(newRun(), key)));
  const key2 = newKey();
  const retried = await counted(() => store.decide(reserve(newRun(), key2)));
  expectVerdict(retried, 'allow');
  let attempt: Allow = retried;
  for (const status of [null, 503]) {
    const dispatchState = status === null ? 'not_sent' : 'response_received';
    await counted(() => store.recordOutcome(outcome(attempt, key2, 'failed', { dispatchState, status })));
    const next = await counted(() => store.decide(reserve(newRun(), key2)));
    expectVerdict(next, 'allow');
    attempt = next;
  }
  await counted(() => store.recordOutcome(outcome(attempt, key2, 'succeeded')));
  await counted(() => store.decide(block(newRun(), 'policy: destroy is not allowed')));
  const key3 = newKey();
  const u = await counted(() => store.decide(reserve(newRun(), key3)));
  expectVerdict(u, 'allow');
  await counted(() => store.recordOutcome(outcome(u, key3, 'unknown')));
  // The retry of an unknown outcome of a tool without honored idempotency nor a lookup: hold.
  expectVerdict(await counted(() => store.decide(reserve(newRun(), key3))), 'hold');
  // A key another run holds right now: pending, recorded only when asked.
  const key4 = newKey();
  expectVerdict(await counted(() => store.decide(reserve(newRun(), key4))), 'allow');
  await counted(() => store.decide(reserve(newRun(), key4, { recordPending: true })));
  await counted(() => store.decide(reserve(newRun(), key4, { recordPending: false })));
  // A run that proposes the done effect again after its one allowed skip is halted.
  const looper = newRun();
  await counted(() => store.decide(reserve(looper, key, { maxDuplicateSkips: 1 })));
  await counted(() => store.decide(reserve(looper, key, { maxDuplicateSkips: 1 })));
  return { retried, perCall };
}
