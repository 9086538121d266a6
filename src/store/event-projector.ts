import type { Store } from './types.js';

/*
 * The gate's projector: folds committed events onto the tables made from them (the decisions;
 * store/functions/eg_project.sql) in the background, so the hot path writes each fact once and a
 * reader that catches up before it reads (KyselyStore does) has little left to do. Gates sharing a
 * database take turns (a round another one runs is skipped); every round's work is bounded.
 */

export type ProjectorStore = Pick<Store, 'projectEvents'>;

export interface ProjectorLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface EventProjectorOptions {
  readonly store: ProjectorStore;
  /** How often it looks for new events; default 200 ms. */
  readonly intervalMs?: number;
  readonly logger?: ProjectorLogger;
}

/** Most rounds one `project()` runs before it lets the timer come back: 64 × 500 × 20 events. */
const MAX_ROUNDS = 20;

export class EventProjector {
  readonly #store: ProjectorStore;
  readonly #intervalMs: number;
  readonly #logger: ProjectorLogger | null;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<unknown> = Promise.resolve();
  #stopped = false;
  #failing = false;

  constructor(options: EventProjectorOptions) {
    this.#store = options.store;
    this.#intervalMs = options.intervalMs ?? 200;
    this.#logger = options.logger ?? null;
  }

  /** Projects every `intervalMs` until `stop()`; a failed round is logged once and retried. */
  start(): void {
    if (this.#timer !== null || this.#stopped) return;
    const tick = (): void => {
      this.#running = this.project()
        .then(() => {
          this.#failing = false;
        })
        .catch((err: unknown) => {
          if (!this.#failing) this.#logger?.warn({ err: String(err) }, 'event projector: round failed');
          this.#failing = true;
        })
        .finally(() => {
          if (!this.#stopped) this.#timer = setTimeout(tick, this.#intervalMs).unref();
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

  /** Rounds until caught up, another process is at it, or the bound; returns events read. */
  async project(): Promise<number> {
    let events = 0;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const r = await this.#store.projectEvents({ wait: false });
      events += r.events;
      if (!r.more || r.busy) break;
    }
    return events;
  }
}
