/*
 * A background loop for the store's off-hot-path workers (the sealer, the projector): one round at
 * a time, the next `intervalMs` after the previous one ended (never overlapping, never piling up
 * behind a slow store), unref'd so it never keeps a process alive, and a `stop()` that waits for
 * the round in progress so a gate closes with its work settled.
 */

export interface PeriodicRoundsOptions {
  readonly intervalMs: number;
  /** One round; its result is ignored. */
  readonly round: () => Promise<unknown>;
  /** A round that threw (the loop goes on). */
  readonly onError: (err: unknown) => void;
}

export class PeriodicRounds {
  readonly #o: PeriodicRoundsOptions;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<unknown> = Promise.resolve();
  #stopped = false;

  constructor(options: PeriodicRoundsOptions) {
    this.#o = options;
  }

  /** Runs a round now and every `intervalMs` after each one ends, until `stop()`. */
  start(): void {
    if (this.#timer !== null || this.#stopped) return;
    const tick = (): void => {
      this.#running = this.#o
        .round()
        .catch((err: unknown) => this.#o.onError(err))
        .finally(() => {
          if (!this.#stopped) this.#timer = setTimeout(tick, this.#o.intervalMs).unref();
        });
    };
    this.#timer = setTimeout(tick, 0).unref();
  }

  /** Stops the rounds and waits for the one in progress. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }
}
