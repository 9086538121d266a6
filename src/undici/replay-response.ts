/** Answering the caller's handler with a gate-made or buffered response, without an upstream. */
import { STATUS_CODES } from 'node:http';
import type { Dispatcher } from 'undici';
import type { GateBodyStream, GateResponse } from '../engine/index.js';

const EMPTY = new Uint8Array(0);

type Handler = Dispatcher.DispatchHandler;

// ---------------------------------------------------------------------------------------------
// Answering the caller's handler without an upstream.

/**
 * Plays a complete `GateResponse` into a dispatch handler: request start, response head, body,
 * end; honours `pause()`/`resume()` and `abort()` as undici's own controller does.
 */
class ReplayController implements Dispatcher.DispatchController {
  readonly #handler: Handler;
  readonly #response: GateResponse;
  readonly #withBody: boolean;
  #step = 0;
  #paused = false;
  #aborted = false;
  #done = false;
  #reason: Error | null = null;

  constructor(handler: Handler, response: GateResponse, withBody: boolean) {
    this.#handler = handler;
    this.#response = response;
    this.#withBody = withBody;
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
    if (!this.#paused) return;
    this.#paused = false;
    queueMicrotask(() => this.run());
  }

  abort(reason: Error): void {
    if (this.#aborted || this.#done) return;
    this.#aborted = true;
    this.#done = true;
    this.#reason = reason;
    try {
      this.#handler.onResponseError?.(this, reason);
    } catch {
      // Nothing is left to tell.
    }
  }

  run(): void {
    while (!this.#paused && !this.#done) {
      try {
        this.#next();
      } catch (err) {
        this.abort(err instanceof Error ? err : new Error(String(err)));
      }
    }
  }

  #next(): void {
    const h = this.#handler;
    const r = this.#response;
    switch (this.#step++) {
      case 0:
        h.onRequestStart?.(this, {});
        return;
      case 1: {
        const headers: Record<string, string | string[]> = { ...r.headers };
        if (this.#withBody) headers['content-length'] = String(r.body.byteLength);
        h.onResponseStart?.(this, r.status, headers, STATUS_CODES[r.status] ?? '');
        return;
      }
      case 2:
        if (this.#withBody && r.body.byteLength > 0) {
          h.onResponseData?.(this, Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength));
        }
        return;
      default:
        this.#done = true;
        h.onResponseEnd?.(this, {});
    }
  }
}

/**
 * Plays a streamed `GateResponse` (an MCP event stream) into a dispatch handler chunk by chunk as
 * the upstream sends them; `pause()` holds the next chunk (and so, through the stream's
 * backpressure, the upstream), `abort()` cancels the stream (the engine then records the attempt
 * without a response).
 */
class StreamReplayController implements Dispatcher.DispatchController {
  readonly #handler: Handler;
  readonly #response: GateResponse & { readonly stream: GateBodyStream };
  #paused = false;
  #aborted = false;
  #done = false;
  #reason: Error | null = null;
  #wake: (() => void) | null = null;

  constructor(handler: Handler, response: GateResponse & { readonly stream: GateBodyStream }) {
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
    this.#reason = reason;
    this.#response.stream.cancel('the caller aborted the request');
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
      delete headers['content-length'];
      h.onResponseStart?.(this, r.status, headers, STATUS_CODES[r.status] ?? '');
      if (!withBody) {
        r.stream.cancel('the response to this method has no body');
      } else {
        for await (const chunk of r.stream) {
          if (this.#aborted) return;
          h.onResponseData?.(this, Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          while (this.#paused && !this.#aborted) {
            await new Promise<void>((resolve) => {
              this.#wake = resolve;
            });
          }
        }
      }
      if (this.#aborted) return;
      this.#done = true;
      h.onResponseEnd?.(this, {});
    } catch (err) {
      if (!this.#aborted && !this.#done) this.abort(err instanceof Error ? err : new Error(String(err)));
    }
  }

  #signal(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }
}

export function replay(handler: Handler, response: GateResponse, method: string): void {
  const withBody = method.toUpperCase() !== 'HEAD';
  const stream = response.stream;
  if (stream !== undefined) {
    const controller = new StreamReplayController(newStyle(handler), { ...response, stream });
    queueMicrotask(() => void controller.run(withBody));
    return;
  }
  const controller = new ReplayController(newStyle(handler), response, withBody);
  queueMicrotask(() => controller.run());
}

/** Only an engine bug or a failing request body source gets here. */
export function fail(handler: Handler, err: unknown): void {
  const controller = new ReplayController(
    newStyle(handler),
    { status: 500, headers: {}, body: EMPTY },
    false,
  );
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
