import { EffectgateError } from '../errors.js';
import type { PolicySet } from '../policy/index.js';
import { type GenerationInfo, type GenerationSettings, PolicyGeneration } from './policy-generation.js';

/** What a reload did: the generation now serving, and the one it replaced. */
export interface ReloadReport extends GenerationInfo {
  readonly previous: GenerationInfo;
}

/** The policies a gate serves now, and what is still winding down from earlier reloads. */
export interface GenerationState extends GenerationInfo {
  /** Replaced generations whose last requests have not finished yet (their workers still up). */
  readonly retiring: number;
  /** Analysis worker threads alive across every generation not yet stopped. */
  readonly analysisWorkers: number;
}

/**
 * The gate's current policy generation and the swap to the next one (hot reload). A reload builds
 * the whole next generation off to the side, waits (bounded) for the first resolution of its
 * governed names, so a tool's host addressed by IP is governed from its first request, and only
 * then swaps it in with one assignment: a request reads `current` once, when it starts. Reloads
 * run one at a time, in the order asked.
 */
export class GenerationSwitch {
  readonly #settings: GenerationSettings;
  readonly #onApplied: (policies: PolicySet) => void;
  readonly #retiring = new Set<PolicyGeneration>();
  #current: PolicyGeneration;
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(
    policies: PolicySet,
    settings: GenerationSettings,
    onApplied: (policies: PolicySet) => void = () => undefined,
  ) {
    this.#settings = settings;
    this.#onApplied = onApplied;
    this.#current = new PolicyGeneration(1, policies, settings);
  }

  /** The generation a request starting now runs under, to its end. */
  get current(): PolicyGeneration {
    return this.#current;
  }

  get state(): GenerationState {
    let analysisWorkers = this.#current.workers;
    for (const g of this.#retiring) analysisWorkers += g.workers;
    return { ...this.#current.info, retiring: this.#retiring.size, analysisWorkers };
  }

  /**
   * Serves `policies` from now on; requests already started finish under the set they started
   * with, and the replaced generation stops once the last of them is done.
   *
   * @throws {EffectgateError} `EG_ERR_CONFIG_INVALID` once the gate is closing.
   */
  reload(policies: PolicySet): Promise<ReloadReport> {
    const next = this.#queue.then(() => this.#swap(policies));
    this.#queue = next.catch(() => undefined);
    return next;
  }

  async #swap(policies: PolicySet): Promise<ReloadReport> {
    this.#refuseClosed();
    const previous = this.#current;
    const next = new PolicyGeneration(previous.number + 1, policies, this.#settings);
    await next.start();
    if (this.#closed) {
      await next.stop();
      this.#refuseClosed();
    }
    this.#current = next;
    this.#onApplied(policies);
    this.#retiring.add(previous);
    void previous.retire().then(() => this.#retiring.delete(previous));
    return { ...next.info, previous: previous.info };
  }

  /** `close()` begins: no more reloads, and no generation refreshes its addresses any longer. */
  closing(): void {
    this.#closed = true;
    this.#current.addresses.stop();
    for (const g of this.#retiring) g.addresses.stop();
  }

  /** After the drain: every generation's workers stop, whether or not a call was abandoned. */
  async stopAll(): Promise<void> {
    await Promise.all([this.#current.stop(), ...[...this.#retiring].map((g) => g.stop())]);
  }

  #refuseClosed(): void {
    if (this.#closed) {
      throw new EffectgateError(
        'EG_ERR_CONFIG_INVALID',
        'the gate is stopping: the policy set was not reloaded',
      );
    }
  }
}
