import type { EngineStore, RecoveredAttempt, StoreHandle, UnknownRule } from '../store/index.js';
import type { GateLogger } from './gate.js';
import type { OutcomeOutbox } from './outcome-outbox.js';

/** How a gate lives on its store: identity, heartbeat, recovery and a bounded, draining stop. */
export interface LifecycleOptions {
  readonly store: EngineStore & Pick<StoreHandle, 'close'>;
  /** Stable across restarts (see `defaultInstanceId`): a gate recovers its own previous life at once. */
  readonly instanceId: string;
  readonly logger: GateLogger;
  readonly heartbeatMs: number;
  /** A replica whose heartbeat is older than this is dead: its in-flight attempts are recovered. */
  readonly staleAfterMs: number;
  /** True when no other gate can use this store (an embedded store this gate opened and locked). */
  readonly exclusive: boolean;
  /** Fallback unknown rule per tool, for operations recorded before the rule was stored with them. */
  readonly rules: Readonly<Record<string, UnknownRule>>;
  /** How long `close()` waits for in-flight calls and unwritten outcomes, in all. */
  readonly drainTimeoutMs: number;
  /** Close the store on `close()` (it was opened for this gate). */
  readonly closeStore: boolean;
  readonly outbox: OutcomeOutbox;
}

/** What a graceful stop could not finish. */
export interface CloseReport {
  /** Outcomes still not written when the drain time ran out (recovered as unknown on the next start). */
  readonly unwrittenOutcomes: number;
  /** Governed calls still in flight when the drain time ran out. */
  readonly abandonedCalls: number;
}

/** Sweep for dead replicas every this many heartbeats. */
const SWEEP_EVERY = 6;

/**
 * The gate's life on its store (docs/design.md §3 "Persist before dispatch": a restart never
 * forgets uncertainty), shared by every front door: `start()` announces the instance and settles
 * what earlier lives and dead replicas left in flight before any traffic is taken; a heartbeat
 * keeps this life visible and sweeps now and then for replicas that died since; `close()` waits
 * (bounded) for in-flight calls and for outcomes the store could not take yet, then marks the
 * instance stopped.
 *
 * Identity: the instance id is stable across restarts, so on start the attempts recorded under it
 * before this registration are a previous life's, recovered at once, not after `staleAfterMs`.
 */
export class GateLifecycle {
  readonly #o: LifecycleOptions;
  #timer: NodeJS.Timeout | null = null;
  #beats = 0;
  #started = false;
  /** This life on the store (registerInstance): heartbeats and the stop speak only for it. */
  #life: string | undefined;
  #closing: Promise<CloseReport> | null = null;
  /** Work the gate must have done before it serves (the first DNS round of governed names). */
  readonly #startHooks: (() => Promise<void>)[] = [];
  readonly #closeHooks: (() => Promise<void>)[] = [];
  /** `rules`, plus those of every tool a policy reload added since. */
  #rules: Readonly<Record<string, UnknownRule>>;

  constructor(options: LifecycleOptions) {
    this.#o = options;
    this.#rules = options.rules;
  }

  /**
   * A reloaded policy set's rules: its tools' override the earlier ones, and a tool it removed
   * keeps its last rule, since operations recorded under it may still need recovering.
   */
  learnRules(rules: Readonly<Record<string, UnknownRule>>): void {
    this.#rules = Object.freeze({ ...this.#rules, ...rules });
  }

  get drainTimeoutMs(): number {
    return this.#o.drainTimeoutMs;
  }

  /** Adds work `start()` waits for, alongside registration (each hook bounds its own wait). */
  onStart(hook: () => Promise<void>): void {
    this.#startHooks.push(hook);
  }

  /** Adds work `close()` does after the drain, before it closes the store (a store socket). */
  onClose(hook: () => Promise<void>): void {
    this.#closeHooks.push(hook);
  }

  /** Registers this life and recovers orphaned attempts; idempotent. */
  async start(): Promise<readonly RecoveredAttempt[]> {
    if (this.#started) return [];
    const o = this.#o;
    const hooks = Promise.all(this.#startHooks.map((hook) => hook()));
    const { life, previous } = await o.store.registerInstance(o.instanceId);
    this.#life = life;
    if (previous !== null && previous.stoppedAt === null) {
      o.logger.warn(
        { instance: o.instanceId, last_heartbeat: previous.heartbeatAt },
        'this instance id did not stop cleanly last time: recovering its in-flight attempts now (give every replica its own --instance-id)',
      );
    }
    const recovered = await this.recover(o.exclusive);
    await hooks;
    this.#started = true;
    this.#timer = setInterval(() => this.#beat(), o.heartbeatMs);
    this.#timer.unref();
    return recovered;
  }

  /** Marks every orphaned attempt `sent_no_response` (its operation `unknown`) and logs each. */
  async recover(exclusive: boolean): Promise<readonly RecoveredAttempt[]> {
    const o = this.#o;
    const recovered = await o.store.recover({
      instanceId: o.instanceId,
      exclusive,
      staleAfterMs: o.staleAfterMs,
      rules: this.#rules,
    });
    for (const r of recovered) {
      o.logger.warn(
        { operation: r.operationId, attempt: r.attemptId, tool: r.toolId, approval: r.approvalId },
        'recovered an attempt without an outcome: marked sent_no_response, operation unknown',
      );
    }
    return recovered;
  }

  /**
   * Graceful stop: waits for `inFlight` (the front door's open calls) and the outbox, together at
   * most `drainTimeoutMs`, then marks the instance stopped (only when nothing was left behind: a
   * stopped instance is recovered as dead, one that left work is recovered on its next start) and
   * closes the store it owns. Safe to call twice.
   */
  close(inFlight: () => Promise<number>): Promise<CloseReport> {
    if (this.#closing === null) this.#closing = this.#close(inFlight);
    return this.#closing;
  }

  async #close(inFlight: () => Promise<number>): Promise<CloseReport> {
    const o = this.#o;
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    const until = Date.now() + o.drainTimeoutMs;
    const abandonedCalls = await inFlight();
    const unwrittenOutcomes = await o.outbox.drain(Math.max(0, until - Date.now()));
    if (this.#started) {
      if (unwrittenOutcomes === 0 && abandonedCalls === 0) {
        await o.store.stopInstance(o.instanceId, this.#life).catch((err: unknown) => {
          o.logger.warn({ err: String(err) }, 'could not mark this gate stopped');
        });
      } else {
        o.logger.error(
          { unwritten_outcomes: unwrittenOutcomes, abandoned_calls: abandonedCalls, instance: o.instanceId },
          'stopped with outcomes not written: the next start of this instance id (or a sweep by another replica) marks those attempts sent_no_response',
        );
      }
    }
    for (const hook of this.#closeHooks) await hook().catch(() => undefined);
    if (o.closeStore) await o.store.close();
    return { unwrittenOutcomes, abandonedCalls };
  }

  #beat(): void {
    const o = this.#o;
    this.#beats += 1;
    o.store
      .heartbeat(o.instanceId, this.#life)
      .then(() => (this.#beats % SWEEP_EVERY === 0 ? this.recover(false) : undefined))
      .catch((err: unknown) => o.logger.error({ err: String(err) }, 'heartbeat or recovery sweep failed'));
  }
}
