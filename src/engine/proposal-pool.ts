import { Worker } from 'node:worker_threads';
import type { PolicyFileText, Tool } from '../policy/index.js';
import type { Proposed } from './proposal.js';
import { fromWire, type WorkerJob, type WorkerReply, type WorkerSetup } from './proposal-wire.js';
import type { GateRequest } from './types.js';

/** Defaults of body analysis off the event loop, in this one place (README "Choices made"). */
export const ANALYSIS_DEFAULTS = Object.freeze({
  /**
   * Bodies from this size up are analysed on a worker. Below it the work is a fraction of a
   * millisecond even for the densest shape the node limit allows, less than a worker round trip.
   */
  offloadBodyBytes: 16 * 1024,
  /** Worker threads (0: every body on the event loop). One keeps the other core for the loop. */
  threads: 1,
  /** Heap of one worker: a body past it fails alone (503), never the gate. */
  maxHeapMb: 256,
  /**
   * Bytes of bodies waiting for or in analysis; past it a large body is refused 503 at once. It
   * bounds memory (a client that posts and hangs up leaves its job queued) and the wait: at the
   * densest shape the node limit allows (140 ms per MiB) a full queue is drained in about 4 s.
   */
  maxQueuedBytes: 32 * 1024 * 1024,
  /** One job's running time before its worker is terminated and the job failed. */
  jobTimeoutMs: 10_000,
});

/** Analysis threads alive in this process, every pool's together: what shows a pool left running. */
let liveWorkers = 0;

/** How many analysis worker threads this process runs now (a replaced policy generation's stop them). */
export function liveAnalysisWorkers(): number {
  return liveWorkers;
}

/** Nice value of a worker thread (Linux: that thread alone), below the event loop's. */
export const ANALYSIS_NICE = 10;

export interface ProposalPoolOptions {
  /** The texts `tools` were compiled from (`policySources`): the worker compiles the same. */
  readonly sources: readonly PolicyFileText[];
  readonly tools: readonly Tool[];
  readonly setup: Omit<WorkerSetup, 'sources'>;
  readonly threads: number;
  /** Defaults: `ANALYSIS_DEFAULTS`. */
  readonly maxHeapMb?: number;
  readonly maxQueuedBytes?: number;
  readonly jobTimeoutMs?: number;
  readonly onWorkerError: (err: Error) => void;
}

/** A failure of the analysis, not of the request: answered 503 `analysis_failed`, nothing sent. */
export class AnalysisFailed extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AnalysisFailed';
  }
}

interface Job {
  readonly id: number;
  readonly request: GateRequest;
  readonly names: readonly string[];
  readonly bytes: number;
  readonly resolve: (p: Proposed) => void;
  readonly reject: (err: Error) => void;
}

interface Slot {
  readonly worker: Worker;
  /** The job it is running, or null when idle. */
  current: Job | null;
  timer: NodeJS.Timeout | null;
}

/**
 * `propose()` on worker threads, for governed bodies large enough that parsing, canonical JSON and
 * hashing them would hold the event loop for milliseconds (a 1 MiB body of 50,000 members: 140 ms),
 * during which every other request, governed or not, waits (measured: four such bodies took
 * ungoverned p50 from 0.8 ms to 638 ms). Jobs run one per worker, oldest first, within a bound on
 * queued bytes and a deadline each. Workers start on the first large body, are unref'd while
 * idle, are replaced when they fail, and stop with `close()`. Every job settles: answered, or
 * failed with {@link AnalysisFailed}.
 */
export class ProposalPool {
  readonly #o: ProposalPoolOptions;
  readonly #setup: WorkerSetup;
  readonly #tools: ReadonlyMap<string, Tool>;
  readonly #slots: Slot[] = [];
  readonly #queue: Job[] = [];
  readonly #maxQueuedBytes: number;
  readonly #jobTimeoutMs: number;
  #queuedBytes = 0;
  #nextId = 1;
  #closed = false;

  constructor(options: ProposalPoolOptions) {
    this.#o = options;
    this.#setup = { ...options.setup, sources: options.sources };
    this.#tools = new Map(options.tools.map((t) => [t.id, t]));
    this.#maxQueuedBytes = options.maxQueuedBytes ?? ANALYSIS_DEFAULTS.maxQueuedBytes;
    this.#jobTimeoutMs = options.jobTimeoutMs ?? ANALYSIS_DEFAULTS.jobTimeoutMs;
  }

  /** Worker threads alive now (started on the first large body, none after `close()`). */
  get workers(): number {
    return this.#slots.length;
  }

  /** @throws {AnalysisFailed} when the worker fails on this request, the queue is full, or the pool is closed. */
  propose(request: GateRequest, names: readonly string[]): Promise<Proposed> {
    if (this.#closed) return Promise.reject(new AnalysisFailed('the gate is stopping'));
    const bytes = request.body.byteLength;
    // One body alone is always taken (it is within the proxy's body limit); others wait their turn.
    if (this.#queuedBytes > 0 && this.#queuedBytes + bytes > this.#maxQueuedBytes) {
      return Promise.reject(
        new AnalysisFailed(
          `the gate is already analysing ${Math.round(this.#queuedBytes / 1024)} KiB of large bodies`,
        ),
      );
    }
    this.#queuedBytes += bytes;
    return new Promise<Proposed>((resolve, reject) => {
      this.#queue.push({ id: this.#nextId++, request, names, bytes, resolve, reject });
      this.#pump();
    });
  }

  /** Fails every job, queued or running, and stops every worker. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const job of this.#queue.splice(0)) this.#settle(job, new AnalysisFailed('the gate is stopping'));
    const slots = this.#slots.splice(0);
    for (const slot of slots) this.#finish(slot, new AnalysisFailed('the gate is stopping'));
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  #pump(): void {
    while (this.#queue.length > 0) {
      let slot = this.#slots.find((s) => s.current === null);
      if (slot === undefined && this.#slots.length < this.#o.threads) {
        try {
          slot = this.#spawn();
        } catch (err) {
          // Threads exhausted, or the entry unloadable: fail what waits rather than throw here.
          for (const job of this.#queue.splice(0))
            this.#settle(job, new AnalysisFailed(String(err), { cause: err }));
          return;
        }
      }
      if (slot === undefined) return;
      const job = this.#queue.shift() as Job;
      // A copy of exactly the body's bytes, moved (not cloned) to the worker: a view into a larger
      // buffer (the interceptor passes the caller's) would otherwise send the whole buffer, and
      // moving the request's own would leave nothing to send upstream. Not `.slice()`: on a
      // Buffer that is a view of the same memory.
      const body = new Uint8Array(job.request.body);
      const message: WorkerJob = { id: job.id, request: { ...job.request, body }, names: job.names };
      try {
        slot.worker.postMessage(message, [body.buffer]);
      } catch (err) {
        // A request that cannot be cloned (never from the adapters' plain data, but never a crash).
        this.#settle(
          job,
          new AnalysisFailed(`the request cannot be handed to a worker: ${String(err)}`, { cause: err }),
        );
        continue;
      }
      slot.current = job;
      slot.worker.ref();
      const running = slot;
      slot.timer = setTimeout(
        () => this.#fail(running, new Error(`analysis took longer than ${this.#jobTimeoutMs} ms`)),
        this.#jobTimeoutMs,
      );
    }
  }

  #spawn(): Slot {
    const entry = workerEntry();
    const worker = new Worker(entry.filename, {
      eval: entry.eval,
      workerData: this.#setup,
      resourceLimits: { maxOldGenerationSizeMb: this.#o.maxHeapMb ?? ANALYSIS_DEFAULTS.maxHeapMb },
    });
    const slot: Slot = { worker, current: null, timer: null };
    liveWorkers += 1;
    worker.once('exit', () => {
      liveWorkers -= 1;
    });
    worker.on('message', (reply: WorkerReply) => {
      const job = slot.current;
      if (job === null || job.id !== reply.id) {
        this.#fail(slot, new Error(`analysis worker answered job ${reply.id}, not the one it runs`));
        return;
      }
      if (!reply.ok) this.#finish(slot, new AnalysisFailed(reply.error));
      else {
        try {
          this.#finish(slot, fromWire(reply.proposed, this.#tools, job.request, this.#setup.bodyLimits));
        } catch (err) {
          this.#finish(slot, new AnalysisFailed(String(err), { cause: err }));
        }
      }
      this.#pump();
    });
    worker.on('error', (err) => this.#fail(slot, err));
    worker.on('exit', (code) => this.#fail(slot, new Error(`analysis worker exited with code ${code}`)));
    this.#slots.push(slot);
    return slot;
  }

  /** Settles the slot's current job with `outcome` and frees the slot. */
  #finish(slot: Slot, outcome: Proposed | AnalysisFailed): void {
    if (slot.timer !== null) clearTimeout(slot.timer);
    slot.timer = null;
    const job = slot.current;
    slot.current = null;
    slot.worker.unref();
    if (job !== null) this.#settle(job, outcome);
  }

  #settle(job: Job, outcome: Proposed | AnalysisFailed): void {
    this.#queuedBytes -= job.bytes;
    if (outcome instanceof AnalysisFailed) job.reject(outcome);
    else job.resolve(outcome);
  }

  /** A crash, the heap limit, a deadline: fails only the job it was running; the next gets a new worker. */
  #fail(slot: Slot, err: Error): void {
    const i = this.#slots.indexOf(slot);
    if (i === -1) return;
    this.#slots.splice(i, 1);
    this.#o.onWorkerError(err);
    this.#finish(slot, new AnalysisFailed(err.message, { cause: err }));
    void slot.worker.terminate();
    if (!this.#closed) this.#pump();
  }
}

/**
 * The worker's entry: the compiled `proposal-worker.js` beside this file, or, when this file runs
 * from its TypeScript source (tests, `tsx`), a bootstrap that registers tsx in the worker first
 * (found from this file, so it works from any working directory).
 */
function workerEntry(): { readonly filename: string | URL; readonly eval: boolean } {
  if (!import.meta.url.endsWith('.ts')) {
    return { filename: new URL('./proposal-worker.js', import.meta.url), eval: false };
  }
  const tsx = tsxApi();
  const source = new URL('./proposal-worker.ts', import.meta.url).href;
  return {
    filename: `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(source)}); })`,
    eval: true,
  };
}

/** tsx's ESM API as seen from this file; the bare name (found from the working directory) if not. */
function tsxApi(): string {
  try {
    return import.meta.resolve('tsx/esm/api');
  } catch {
    return 'tsx/esm/api';
  }
}
