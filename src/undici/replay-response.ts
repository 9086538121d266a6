/** Answering the caller's handler with a gate-made or buffered response, without an upstream. */
import { STATUS_CODES } from 'node:http';
import type { Dispatcher } from 'undici';
import type { GateResponse } from '../engine/index.js';

const EMPTY = new Uint8Array(0);

type Handler = Dispatcher.DispatchHandler;

// ---------------------------------------------------------------------------------------------
// Answering the caller's handler without an upstream.

/**
 * Plays a `GateResponse` into a dispatch handler: request start, response head, body, end. The body
 * is the buffered bytes (with their Content-Length) or, for a streamed answer (an MCP event stream),
 * each chunk as the upstream sends it. Honours `pause()`/`resume()` as undici's own controller does
 * (a paused handler gets no chunk, and through the stream's backpressure the upstream waits too);
 * `abort()` cancels a stream, and the engine records its attempt without a response.
 */
class ReplayController implements Dispatcher.DispatchController {
  readonly #handler: Handler;
  readonly #response: GateResponse;
  #paused = false;
  #aborted = false;
  #done = false;
  #reason: Error | null = null;
  #wake: (() => void) | null = null;

  constructor(handler: Handler, response: GateResponse) {
    this.#handler = handler;
    this.#response = response;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  get paused(): boolean {
    return this.#paused;
  }

  get reason(): Error | null {
    return this.#reason;
  }

  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    this.#paused = false;
    this.#signal();
  }

  abort(reason: Error): void {
    if (this.#aborted || this.#done) return;
    this.#aborted = true;
    this.#done = true;
    this.#reason = reason;
    this.#response.stream?.cancel('the caller aborted the request');
    this.#signal();
    try {
      this.#handler.onResponseError?.(this, reason);
    } catch {
      // Nothing is left to tell.
    }
  }

  async run(withBody: boolean): Promise<void> {
    const h = this.#handler;
    const r = this.#response;
    try {
      h.onRequestStart?.(this, {});
      if (this.#aborted) return;
      const headers: Record<string, string | string[]> = { ...r.headers };
      if (r.stream !== undefined) delete headers['content-length'];
      else if (withBody) headers['content-length'] = String(r.body.byteLength);
      h.onResponseStart?.(this, r.status, headers, STATUS_CODES[r.status] ?? '');
      if (!withBody) r.stream?.cancel('the response to this method has no body');
      else {
        for await (const chunk of r.stream ?? buffered(r.body)) {
          await this.#unpaused();
          if (this.#aborted) return;
          h.onResponseData?.(this, Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        }
      }
      await this.#unpaused();
      if (this.#aborted) return;
      this.#done = true;
      h.onResponseEnd?.(this, {});
    } catch (err) {
      this.abort(err instanceof Error ? err : new Error(String(err)));
    }
  }

  async #unpaused(): Promise<void> {
    while (this.#paused && !this.#aborted) {
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

/** A buffered body as the one chunk it is (none when empty). */
async function* buffered(body: Uint8Array): AsyncGenerator<Uint8Array> {
  if (body.byteLength > 0) yield body;
}

export function replay(handler: Handler, response: GateResponse, method: string): void {
  const controller = new ReplayController(newStyle(handler), response);
  queueMicrotask(() => void controller.run(method.toUpperCase() !== 'HEAD'));
}

/** Only an engine bug or a failing request body source gets here. */
export function fail(handler: Handler, err: unknown): void {
  const controller = new ReplayController(newStyle(handler), { status: 500, headers: {}, body: EMPTY });
  controller.abort(err instanceof Error ? err : new Error(String(err)));
}

/**
 * `compose()` always hands interceptors a new-style handler (undici's `WrapHandler`); a legacy one
 * (`onConnect`/`onHeaders`/`onData`/`onComplete`/`onError`) arrives only when the interceptor is
 * called by hand, and is adapted the way `WrapHandler` does.
 */
function newStyle(handler: Handler): Handler {
  if (typeof handler.onRequestStart === 'function') return handler;
  const legacy = handler as Handler & {
    onConnect?: (abort: (reason?: Error) => void, context?: object) => void;
    onHeaders?: (status: number, raw: Buffer[], resume: () => void, message: string) => boolean | undefined;
    onData?: (chunk: Buffer) => boolean | undefined;
    onComplete?: (trailers: Buffer[]) => void;
    onError?: (err: Error) => void;
  };
  return {
    onRequestStart: (c, context) =>
      legacy.onConnect?.((reason) => c.abort(reason ?? new Error('aborted')), context),
    onResponseStart: (c, status, headers, message) => {
      const raw: Buffer[] = [];
      for (const [name, value] of Object.entries(headers)) {
        if (value === undefined) continue;
        for (const v of Array.isArray(value) ? value : [value])
          raw.push(Buffer.from(name), Buffer.from(v, 'latin1'));
      }
      if (legacy.onHeaders?.(status, raw, () => c.resume(), message ?? '') === false) c.pause();
    },
    onResponseData: (c, chunk) => {
      if (legacy.onData?.(chunk) === false) c.pause();
    },
    onResponseEnd: () => legacy.onComplete?.([]),
    onResponseError: (_c, err) => legacy.onError?.(err),
  };
}
