/**
 * A response body that flows through the gate instead of being buffered (an MCP `text/event-stream`
 * answer, docs/design.md §4.1): the producer pushes chunks as the destination sends them, one consumer
 * reads them as an async iterable, and memory stays bounded: past `highWaterMark` queued bytes the
 * producer is told to pause, and to resume once the consumer has drained the queue.
 */

/** What the adapters read a streamed body through, and how they say the client went away. */
export interface GateBodyStream extends AsyncIterable<Uint8Array> {
  /** The client stopped reading (closed the stream or the connection): stop the upstream too. */
  cancel(reason: string): void;
}

export interface BodyStreamHooks {
  /** Called when the queue passes its high-water mark. */
  pause(): void;
  /** Called when the consumer has drained the queue after a pause. */
  resume(): void;
  /** Called once when the consumer cancels. */
  cancel(reason: string): void;
}

/**
 * Sees every chunk as the producer pushes it, whoever reads (or does not read) the stream, and
 * how it ends. `chunk` may answer a promise: the reader is then handed that chunk only once the
 * promise settles (what the gate records before an agent may see a response).
 */
export interface BodyStreamObserver {
  chunk(chunk: Uint8Array): Promise<unknown> | null;
  end(end: BodyStreamEnd): void;
}

/** How a stream ended, as the producer saw it. */
export type BodyStreamEnd =
  | { readonly kind: 'ended' }
  | { readonly kind: 'failed'; readonly error: Error }
  | { readonly kind: 'cancelled'; readonly reason: string };

const DEFAULT_HIGH_WATER_MARK = 256 * 1024;

export class BodyStream implements GateBodyStream {
  readonly #hooks: BodyStreamHooks;
  readonly #highWaterMark: number;
  readonly #queue: { readonly chunk: Uint8Array; readonly hold: Promise<unknown> | null }[] = [];
  #observer: BodyStreamObserver | null = null;
  #queuedBytes = 0;
  #paused = false;
  #end: BodyStreamEnd | null = null;
  #wake: (() => void) | null = null;
  #iterating = false;
  readonly #ended: Promise<BodyStreamEnd>;
  #resolveEnded!: (end: BodyStreamEnd) => void;

  constructor(hooks: BodyStreamHooks, highWaterMark = DEFAULT_HIGH_WATER_MARK) {
    this.#hooks = hooks;
    this.#highWaterMark = highWaterMark;
    this.#ended = new Promise((resolve) => {
      this.#resolveEnded = resolve;
    });
  }

  /** Resolves once the stream has ended, failed or been cancelled. */
  get ended(): Promise<BodyStreamEnd> {
    return this.#ended;
  }

  /**
   * Attaches the one observer, before anyone reads: it sees the chunks queued so far first (the
   * producer may push some before the stream's owner gets to observe it), then the end if it came.
   */
  observe(observer: BodyStreamObserver): void {
    if (this.#observer !== null) throw new Error('a body stream has one observer');
    if (this.#iterating) throw new Error('observe a body stream before reading it');
    this.#observer = observer;
    for (const [i, item] of this.#queue.entries()) {
      const hold = observer.chunk(item.chunk);
      if (hold !== null) this.#queue[i] = { chunk: item.chunk, hold };
    }
    if (this.#end !== null) observer.end(this.#end);
  }

  push(chunk: Uint8Array): void {
    if (this.#end !== null) return;
    const hold = this.#observer === null ? null : this.#observer.chunk(chunk);
    this.#queue.push({ chunk, hold });
    this.#queuedBytes += chunk.byteLength;
    if (!this.#paused && this.#queuedBytes > this.#highWaterMark) {
      this.#paused = true;
      this.#hooks.pause();
    }
    this.#signal();
  }

  /** The producer finished (`ended`) or broke (`failed`); queued chunks are still delivered. */
  finish(end: Exclude<BodyStreamEnd, { kind: 'cancelled' }>): void {
    if (this.#end !== null) return;
    this.#end = end;
    this.#resolveEnded(end);
    this.#observer?.end(end);
    this.#signal();
  }

  cancel(reason: string): void {
    if (this.#end !== null) return;
    this.#end = { kind: 'cancelled', reason };
    this.#queue.length = 0;
    this.#queuedBytes = 0;
    this.#resolveEnded(this.#end);
    this.#observer?.end(this.#end);
    this.#hooks.cancel(reason);
    this.#signal();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array> {
    if (this.#iterating) throw new Error('a body stream has one reader');
    this.#iterating = true;
    for (;;) {
      const item = this.#queue.shift();
      if (item !== undefined) {
        this.#queuedBytes -= item.chunk.byteLength;
        if (this.#paused && this.#queuedBytes === 0 && this.#end === null) {
          this.#paused = false;
          this.#hooks.resume();
        }
        if (item.hold !== null) await item.hold;
        yield item.chunk;
        continue;
      }
      const end = this.#end;
      if (end !== null) {
        if (end.kind === 'failed') throw end.error;
        return;
      }
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
    }
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }
}
