import { PeriodicRounds } from './periodic-rounds.js';
import type { AuditStore } from './types.js';

/*
 * The gate's projector: folds committed events onto the tables made from them (decisions,
 * operations, attempts; store/functions/eg_project.sql) in the background, so the hot path writes
 * each fact once and a reader that catches up before it reads (KyselyStore does) has little left
 * to do. Gates sharing a database take turns (a round another one runs is skipped); every round's work is bounded.
 */

export type ProjectorStore = Pick<AuditStore, 'projectEvents'>;

export interface ProjectorLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface EventProjectorOptions {
  readonly store: ProjectorStore;
  /** How often it looks for new events; default 200 ms. */
  readonly intervalMs?: number;
  readonly logger?: ProjectorLogger;
}

/** Most rounds one `project()` runs before it lets the timer come back: 20 × 5,000 events. */
const MAX_ROUNDS = 20;

export class EventProjector {
  readonly #store: ProjectorStore;
  readonly #rounds: PeriodicRounds;
  #failing = false;

  constructor(options: EventProjectorOptions) {
    this.#store = options.store;
    const logger = options.logger ?? null;
    this.#rounds = new PeriodicRounds({
      intervalMs: options.intervalMs ?? 200,
      round: async () => {
        await this.project();
        this.#failing = false;
      },
      onError: (err) => {
        // Once until a round succeeds again, not every 200 ms while the store is away.
        if (!this.#failing) logger?.warn({ err: String(err) }, 'event projector: round failed');
        this.#failing = true;
      },
    });
  }

  /** Projects every `intervalMs` until `stop()`; a failed round is logged once and retried. */
  start(): void {
    this.#rounds.start();
  }

  /** Stops the rounds and waits for the one in progress. */
  stop(): Promise<void> {
    return this.#rounds.stop();
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
