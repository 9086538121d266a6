import type { BodyStream, BodyStreamEnd, GateBodyStream } from './body-stream.js';
import { isResponseTo, type JsonRpcResponse, parseJson } from './jsonrpc-outcome.js';
import { SseReader } from './sse-reader.js';

/** What a governed event stream showed about its call, once that is known. */
export type StreamSettlement =
  /** The JSON-RPC response to the request's id: the outcome is read from it. */
  | { readonly kind: 'response'; readonly response: JsonRpcResponse; readonly data: string }
  /** The stream ended, broke or was closed by the agent before that response: nobody knows. */
  | { readonly kind: 'no_response'; readonly detail: string };

/**
 * Most data one event may carry before it is skipped unread (then the stream cannot show the
 * response, and the attempt stays without one): the cap of a buffered governed answer.
 */
export const MAX_EVENT_BYTES = 8 * 1024 * 1024;

export interface StreamWatch {
  /** What the adapter writes to the agent: the upstream's chunks, as they come. */
  readonly body: GateBodyStream;
  /** What `onSettled` returned, once it has been called (at the response, or at the end). */
  readonly recorded: Promise<unknown>;
}

/**
 * Forwards a `text/event-stream` answer of a JSON-RPC tool to the agent chunk by chunk (MCP
 * progress notifications arrive as they are sent, docs/design.md §4.1) while reading it for the
 * JSON-RPC response that answers `rpcId`. The outcome is known at that event; a stream that ends
 * without it, breaks, or that the agent closes first (MCP 2026-07-28: closing is cancellation)
 * leaves the attempt `sent_no_response`, and closing it closes the upstream request too. Memory is
 * bounded by the stream's backpressure and by `maxEventBytes` per event.
 *
 * `onSettled` is called once with what the stream showed. The chunk carrying the response waits
 * for it (the outcome recorded, as a buffered answer waits), so an agent that reads the result and
 * repeats the call at once finds the key confirmed, not still pending.
 */
export function watchEventStream(
  upstream: BodyStream,
  rpcId: string | number | null,
  maxEventBytes: number,
  onSettled: (s: StreamSettlement) => Promise<unknown>,
): StreamWatch {
  let done = false;
  let resolveRecorded!: (p: Promise<unknown>) => void;
  const recorded = new Promise<unknown>((resolve) => {
    resolveRecorded = resolve;
  });
  /** Calls `onSettled` once; answers its promise (never rejecting) for the response chunk to wait on. */
  const settle = (s: StreamSettlement): Promise<unknown> => {
    if (done) return Promise.resolve();
    done = true;
    const p = Promise.resolve()
      .then(() => onSettled(s))
      .catch(() => undefined);
    resolveRecorded(p);
    return p;
  };
  const reader = new SseReader(maxEventBytes);
  const decoder = new TextDecoder();
  const why = (base: string): string =>
    reader.oversized > 0
      ? `${base} (${reader.oversized} event(s) over ${maxEventBytes} bytes were not read)`
      : base;
  // Read as the destination sends, not as the agent reads: the outcome is known (and recorded)
  // whether or not anyone reads the stream, and however it ends.
  upstream.observe({
    chunk(chunk: Uint8Array): Promise<unknown> | null {
      if (done) return null;
      for (const data of reader.feed(decoder.decode(chunk, { stream: true }))) {
        const message = parseJson(data);
        if (isResponseTo(message, rpcId)) return settle({ kind: 'response', response: message, data });
      }
      return null;
    },
    end(end: BodyStreamEnd): void {
      const detail =
        end.kind === 'ended'
          ? 'the event stream ended without the JSON-RPC response'
          : end.kind === 'failed'
            ? `the event stream broke before the response (${end.error.message})`
            : `the agent closed the event stream before the response (${end.reason})`;
      settle({ kind: 'no_response', detail: why(detail) });
    },
  });
  const body: GateBodyStream = {
    cancel: (reason) => upstream.cancel(reason),
    async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array> {
      try {
        yield* upstream;
      } finally {
        // The adapter stopped reading without a cancel (its loop broke): the same as a close.
        upstream.cancel('the agent stopped reading');
      }
    },
  };
  return { body, recorded };
}
