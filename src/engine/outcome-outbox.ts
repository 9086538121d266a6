import {
  type EngineStore,
  isTransientStoreFailure,
  type OperationState,
  type OutcomeInput,
  type ShadowDispatchInput,
} from '../store/index.js';
import type { GateLogger } from './gate.js';
import { type GateMetrics, noGateMetrics } from './gate-metrics.js';

/** The outbox writes outcomes and shadow results, nothing else. */
type OutboxStore = Pick<EngineStore, 'recordOutcome' | 'recordShadowDispatch'>;

/** Bounds of the outbox; defaults in {@link OUTBOX_DEFAULTS}. */
export interface OutboxOptions {
  /** Outcomes kept in memory at most; one more is dropped (logged, counted) and left to the SQL rules. */
  readonly maxEntries: number;
  /** First retry delay; doubled per failed round up to `maxDelayMs`, with jitter. */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  /**
   * How long the agent's response waits for the first write of its outcome. A store that answers
   * (or refuses at once, e.g. a cut connection) is not affected; one that stops answering delays
   * the response by this much at most, and the write goes on in the background.
   */
  readonly firstWriteWaitMs: number;
}

/** How long an abandoned decide is looked for after the store first said it has no such attempt. */
const ABANDONED_WATCH_MS = 30_000;

export const OUTBOX_DEFAULTS: OutboxOptions = Object.freeze({
  // About 1 KB an entry: 10k outcomes are ~10 MB, minutes of governed traffic at a high rate.
  maxEntries: 10_000,
  baseDelayMs: 50,
  // Short on purpose: an outcome that lands before its key's pending_ttl keeps the operation out of
  // `unknown` (a hold for a person). One gate writes its queue one call at a time, oldest first,
  // so even a second apart it never floods a store that comes back.
  maxDelayMs: 1_000,
  firstWriteWaitMs: 1_000,
});

/** What the outbox did with one outcome. */
export type OutboxResult =
  | { readonly recorded: true; readonly operationState: OperationState | null }
  | { readonly recorded: false; readonly queued: boolean };

/** What the outbox reports about itself (the gate's metrics and its stop line). */
export interface OutboxStats {
  readonly pending: number;
  readonly retried: number;
  readonly dropped: number;
}

/**
 * Outcomes the store could not take yet (docs/design.md §4.1: "a gate that could not record an outcome
 * keeps trying while it runs"). The first write is the request's own (the second store round trip
 * of an allow); when it fails with a store outage or a transient refusal (a lock wait past
 * lock_timeout: STORE_SQLSTATES) the outcome waits here and is written again with
 * exponential backoff, oldest first, while the gate runs. `eg_record_outcome` is idempotent for an
 * attempt that already has this outcome, so a write whose commit was lost with its connection is
 * safely written again.
 *
 * Memory is bounded: past `maxEntries` an outcome is dropped with an error log naming its
 * attempt. That is safe, not lucky: the attempt keeps no outcome in the store, so after its
 * pending_ttl (or a restart's recovery) it is `sent_no_response` and its operation `unknown`, and
 * the unknown-outcome rules decide the next proposal; it never frees the key.
 *
 * What a request shadow mode sent anyway got back waits here the same way (`recordShadow`):
 * the destination may have done its effect, so the trail must say so once the store is back, and a
 * graceful stop drains it with the outcomes (eg_shadow_dispatched ignores a second write).
 */
/** One write waiting for the store: an allowed attempt's outcome, or a shadow dispatch. */
type Deferred =
  | { readonly kind: 'outcome'; readonly input: OutcomeInput }
  | { readonly kind: 'shadow'; readonly input: ShadowDispatchInput };

export class OutcomeOutbox {
  readonly #store: OutboxStore;
  readonly #logger: GateLogger;
  readonly #o: OutboxOptions;
  readonly #metrics: GateMetrics;
  /** By attempt id (outcomes) or `shadow:<decision id>`. */
  readonly #queue = new Map<string, Deferred>();
  /**
   * Abandoned decides whose attempt the store did not have yet, until when to look again: a decide
   * the client gave up on (a read timeout) may still be running on the server and commit later, and
   * its attempt must then get its `not_sent` instead of expiring into `unknown`.
   */
  readonly #unseen = new Map<string, number>();
  #timer: NodeJS.Timeout | null = null;
  #delayMs: number;
  #flushing: Promise<void> | null = null;
  /** First writes still running after the response went (a slow store): drain waits for them. */
  readonly #writing = new Set<Promise<unknown>>();
  #retried = 0;
  #dropped = 0;
  #closed = false;

  constructor(
    store: OutboxStore,
    logger: GateLogger,
    options: OutboxOptions = OUTBOX_DEFAULTS,
    metrics: GateMetrics = noGateMetrics,
  ) {
    this.#store = store;
    this.#logger = logger;
    this.#o = options;
    this.#metrics = metrics;
    this.#delayMs = options.baseDelayMs;
  }

  get stats(): OutboxStats {
    return { pending: this.#queue.size + this.#writing.size, retried: this.#retried, dropped: this.#dropped };
  }

  /**
   * Writes `outcome` now (one round trip). When the store is unavailable the outcome is queued for
   * retries and `recorded: false` answered at once; when the store is slow, after
   * `firstWriteWaitMs` the same, while the write goes on (and is queued if it then fails). The
   * agent's response never waits longer than that for the store.
   */
  async record(outcome: OutcomeInput): Promise<OutboxResult> {
    const write = this.#store.recordOutcome(outcome);
    let timer: NodeJS.Timeout | undefined;
    const slow = new Promise<'slow'>((resolve) => {
      timer = setTimeout(() => resolve('slow'), this.#o.firstWriteWaitMs);
    });
    try {
      const first = await Promise.race([write, slow]);
      if (first !== 'slow') return { recorded: true, operationState: first.operationState };
    } catch (err) {
      if (!isTransientStoreFailure(err)) throw err;
      return { recorded: false, queued: this.enqueue(outcome, err) };
    } finally {
      clearTimeout(timer);
    }
    // Slow store: answer the agent now, keep the write; if it fails, the outbox takes over.
    const tracked = write.then(
      () => undefined,
      (err: unknown) => {
        if (isTransientStoreFailure(err)) this.enqueue(outcome, err);
        else
          this.#logger.error(
            { err: messageOf(err), attempt: outcome.attemptId },
            'outcome refused by the store',
          );
      },
    );
    this.#writing.add(tracked);
    void tracked.finally(() => this.#writing.delete(tracked));
    return { recorded: false, queued: true };
  }

  /**
   * Writes what a request shadow mode sent anyway got back (one round trip); on a store outage it
   * is queued for the retry loop like an outcome. True when it is recorded now.
   */
  async recordShadow(dispatch: ShadowDispatchInput): Promise<boolean> {
    try {
      await this.#store.recordShadowDispatch(dispatch);
      return true;
    } catch (err) {
      if (isTransientStoreFailure(err)) this.#enqueue({ kind: 'shadow', input: dispatch }, err);
      else
        this.#logger.error(
          { err: messageOf(err), decision: dispatch.decisionId },
          'shadow dispatch refused by the store',
        );
      return false;
    }
  }

  /** Queues an outcome for the retry loop; false when the bound is reached (dropped). */
  enqueue(outcome: OutcomeInput, cause: unknown): boolean {
    return this.#enqueue({ kind: 'outcome', input: outcome }, cause);
  }

  #enqueue(entry: Deferred, cause: unknown): boolean {
    const id = queueId(entry);
    const names =
      entry.kind === 'outcome'
        ? { operation: entry.input.operationId, attempt: entry.input.attemptId }
        : { operation: entry.input.operationId, decision: entry.input.decisionId };
    if (this.#queue.has(id)) return true;
    if (this.#closed || this.#queue.size >= this.#o.maxEntries) {
      this.#dropped += 1;
      // Counted as queued and dropped at once, so the pending gauge stays exact.
      this.#metrics.deferredOutcome('queued');
      this.#metrics.deferredOutcome('dropped');
      this.#logger.error(
        { err: messageOf(cause), ...names, pending: this.#queue.size },
        this.#closed
          ? 'outcome not recorded and the gate is stopping: the attempt stays without an outcome until recovery marks it sent_no_response'
          : 'outcome outbox full: outcome dropped; the attempt will read as sent_no_response (operation unknown) after its pending_ttl',
      );
      return false;
    }
    this.#queue.set(id, entry);
    this.#metrics.deferredOutcome('queued');
    this.#logger.warn(
      { err: messageOf(cause), ...names },
      entry.kind === 'outcome'
        ? 'outcome not recorded yet: retrying with backoff while the gate runs'
        : 'shadow dispatch not recorded yet: retrying with backoff while the gate runs',
    );
    this.#schedule();
    return true;
  }

  /**
   * Keeps flushing until the queue is empty or `timeoutMs` passed (graceful stop). Returns how many
   * outcomes could not be written; no more are accepted afterwards.
   */
  async drain(timeoutMs: number): Promise<number> {
    const until = Date.now() + timeoutMs;
    // Slow first writes first: each either lands or queues itself for the loop below.
    if (this.#writing.size > 0) {
      await Promise.race([
        Promise.allSettled([...this.#writing]),
        new Promise((r) => setTimeout(r, Math.max(0, until - Date.now()))),
      ]);
    }
    this.#closed = true;
    let delay = this.#o.baseDelayMs;
    while (this.#queue.size > 0 && Date.now() < until) {
      if (this.#timer !== null) {
        clearTimeout(this.#timer);
        this.#timer = null;
      }
      await this.#flush();
      if (this.#queue.size === 0) break;
      await new Promise((r) => setTimeout(r, Math.min(delay, Math.max(0, until - Date.now()))));
      delay = Math.min(delay * 2, this.#o.maxDelayMs);
    }
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    return this.#queue.size + this.#writing.size;
  }

  #schedule(): void {
    if (this.#timer !== null || this.#flushing !== null || this.#closed) return;
    // Full jitter: gates that lost the same store do not all come back in the same millisecond.
    const delay = Math.round(this.#delayMs / 2 + Math.random() * (this.#delayMs / 2));
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.#flush().then(() => {
        if (this.#queue.size > 0) this.#schedule();
      });
    }, delay);
    // The outbox never keeps a process alive on its own; close() drains it explicitly.
    this.#timer.unref();
  }

  /** One pass over the queue, oldest first; stops at the first outage (the store is still down). */
  #flush(): Promise<void> {
    if (this.#flushing !== null) return this.#flushing;
    this.#flushing = (async () => {
      for (const [id, entry] of this.#queue) {
        try {
          this.#retried += 1;
          if (entry.kind === 'shadow') {
            await this.#store.recordShadowDispatch(entry.input);
            this.#queue.delete(id);
            this.#metrics.deferredOutcome('written');
            this.#logger.info({ decision: entry.input.decisionId }, 'late shadow dispatch recorded');
            continue;
          }
          const outcome = entry.input;
          const attemptId = id;
          const written = await this.#store.recordOutcome(outcome);
          if (outcome.operationId === null && written.operationState === null && !this.#closed) {
            const until = this.#unseen.get(attemptId) ?? Date.now() + ABANDONED_WATCH_MS;
            if (Date.now() < until) {
              // Not committed (yet): look again on a slow round; later ones still go now.
              this.#unseen.set(attemptId, until);
              this.#delayMs = this.#o.maxDelayMs;
              continue;
            }
          }
          this.#unseen.delete(attemptId);
          this.#queue.delete(attemptId);
          this.#metrics.deferredOutcome('written');
          if (this.#unseen.size === 0) this.#delayMs = this.#o.baseDelayMs;
          this.#logger.info({ operation: outcome.operationId, attempt: attemptId }, 'late outcome recorded');
        } catch (err) {
          if (isTransientStoreFailure(err)) {
            this.#delayMs = Math.min(this.#delayMs * 2, this.#o.maxDelayMs);
            return;
          }
          // The store answered and refused it: retrying cannot help. The attempt stays without
          // this outcome and the SQL rules treat it as unknown (never as a free key).
          this.#queue.delete(id);
          this.#dropped += 1;
          this.#metrics.deferredOutcome('dropped');
          this.#logger.error(
            { err: messageOf(err), operation: entry.input.operationId, id },
            'outcome refused by the store; dropped',
          );
        }
      }
    })().finally(() => {
      this.#flushing = null;
    });
    return this.#flushing;
  }
}

function queueId(entry: Deferred): string {
  return entry.kind === 'outcome' ? entry.input.attemptId : `shadow:${entry.input.decisionId}`;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
