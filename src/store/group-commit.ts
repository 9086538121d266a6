import type { RoundTripCounter } from './counting-dialect.js';
import { batchAnswers } from './hot-answers.js';
import type { HotSender, StoreFunction } from './hot-call.js';
import { lockTimedOut, lostToAnother, rolledBack } from './store-sqlstates.js';
import type { GroupCommitStats } from './types.js';

/**
 * Runs `select <fn>(<input as JSON text>)` (or shares an `eg_batch` with other calls) and returns
 * the function's result: what the store's hot path calls.
 */
export type HotCall = (fn: StoreFunction, input: unknown) => Promise<unknown>;

/** How many hot-path round trips may be in flight, and how many calls one batch may carry. */
export interface GroupCommitLimits {
  /** Hot-path round trips in flight at once; a call beyond that waits and is batched. */
  readonly maxInFlight: number;
  /** Calls in one `eg_batch` (PostgreSQL keeps the subtransaction-free batch short). */
  readonly maxBatch: number;
}

/**
 * PostgreSQL: 4 round trips in flight (a quarter of the pool), up to 16 calls each.
 * Measured on 2 cores (bench/README.md, "Group commit"): a batch of 8 costs PostgreSQL about a third
 * less CPU per allow than 8 calls alone (one statement, one commit, one WAL flush, one wake-up).
 */
export const POSTGRES_GROUP_COMMIT: GroupCommitLimits = Object.freeze({ maxInFlight: 4, maxBatch: 16 });

/** PGlite runs one statement at a time anyway: one round trip in flight. */
export const PGLITE_GROUP_COMMIT: GroupCommitLimits = Object.freeze({ maxInFlight: 1, maxBatch: 16 });

interface Waiting {
  readonly fn: StoreFunction;
  readonly input: string;
  readonly resolve: (result: unknown) => void;
  readonly reject: (err: unknown) => void;
}

interface Lane {
  readonly queue: Waiting[];
  inFlight: number;
  scheduled: boolean;
}

/**
 * Group commit: concurrent hot-path calls of this process share round trips and
 * transactions. A call that finds fewer than `maxInFlight` round trips in flight goes at once,
 * alone (`select eg_decide($1)`, exactly as without group commit: c=1 pays one microtask); the
 * calls that arrive while the store is that busy queue and go together in the next free round
 * trip, as one `eg_batch` (one statement, one COMMIT for all of them), proposals and outcomes
 * alike: a gate under load pays one commit for both phases of many calls.
 *
 * The guarantee does not change: each call's result is the one it would have had alone, given only
 * after the batch committed. A batch the server refused (an error with an SQLSTATE of a statement
 * that failed: a deadlock between two batches, an exception one call raised) was rolled back whole,
 * so its calls are sent again one by one and each gets its own answer. A batch whose answer was
 * lost (a cut connection, a timeout) may have committed: every call in it gets that error, as a
 * lone call would, and the gate handles each as it handles a lost answer today.
 */
/** The hot path's calls, and what group commit did with them. */
export interface GroupCommit {
  readonly call: HotCall;
  readonly stats: () => GroupCommitStats;
}

export function groupCommit(
  sender: HotSender,
  counter: RoundTripCounter,
  limits: GroupCommitLimits,
): GroupCommit {
  // One lane for both functions: a batch carries proposals and outcomes together.
  const lane: Lane = { queue: [], inFlight: 0, scheduled: false };
  let batches = 0;
  let batchedCalls = 0;
  let fallbacks = 0;

  // A lone call takes its locks in the order every call does, but a batch holds the locks of all
  // its calls at once, so a lone call can lose a deadlock against a batch (or a batch of another
  // process). PostgreSQL rolled it back: it is sent again, a few times, as the batch's calls are.
  const alone = async (fn: StoreFunction, input: string): Promise<unknown> => {
    for (let attempt = 1; ; attempt++) {
      counter.add();
      try {
        return await sender.one(fn, input);
      } catch (err) {
        if (attempt >= LONE_RETRIES || !lostToAnother(err)) throw err;
      }
    }
  };

  const send = async (calls: readonly Waiting[]): Promise<void> => {
    if (calls.length === 1) {
      const [only] = calls as [Waiting];
      await alone(only.fn, only.input).then(only.resolve, only.reject);
      return;
    }
    batches++;
    batchedCalls += calls.length;
    for (let i = 0; i < calls.length; i++) counter.add();
    let results: readonly unknown[];
    try {
      results = await sender.many(calls);
    } catch (err) {
      // Not rolled back (it may have landed), or rolled back because a lock stayed taken past
      // lock_timeout (eg_decide.sql): one by one, each call would only wait for it again.
      if (!rolledBack(err) || lockTimedOut(err)) {
        for (const c of calls) c.reject(err);
        return;
      }
      fallbacks++;
      await Promise.all(calls.map((c) => alone(c.fn, c.input).then(c.resolve, c.reject)));
      return;
    }
    // One result per call, or none for any: a short answer must not shift results onto the
    // wrong calls (hot-answers.ts checks each result itself).
    try {
      results = batchAnswers(results, calls.length);
    } catch (err) {
      for (const c of calls) c.reject(err);
      return;
    }
    calls.forEach((c, i) => {
      c.resolve(results[i]);
    });
  };

  const drain = (): void => {
    lane.scheduled = false;
    while (lane.inFlight < limits.maxInFlight && lane.queue.length > 0) {
      const calls = lane.queue.splice(0, limits.maxBatch);
      lane.inFlight++;
      void send(calls).finally(() => {
        lane.inFlight--;
        if (lane.queue.length > 0 && !lane.scheduled) drain();
      });
    }
  };

  const call: HotCall = (fn, input) => {
    const text = JSON.stringify(input);
    return new Promise<unknown>((resolve, reject) => {
      lane.queue.push({ fn, input: text, resolve, reject });
      // Idle store: the call leaves after one microtask (with any made in the same tick). Busy
      // store: it waits for the end of this turn of the event loop (setImmediate), so the calls
      // that the I/O handled in this turn leave with it. Full: the next round trip to finish
      // takes the queue.
      if (lane.inFlight < limits.maxInFlight && !lane.scheduled) {
        lane.scheduled = true;
        if (lane.inFlight === 0) queueMicrotask(() => drain());
        else setImmediate(() => drain());
      }
    });
  };

  return { call, stats: () => ({ batches, batchedCalls, fallbacks }) };
}

/** Times a lone call is sent when PostgreSQL keeps failing it as a deadlock or serialization victim. */
const LONE_RETRIES = 3;
