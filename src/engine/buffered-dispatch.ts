/**
 * One governed request through an undici dispatcher, complete body in, complete response out:
 * shared by both adapters (the proxy's upstream pools and the interceptor's next dispatcher), so
 * "what left the gate" is decided in exactly one place.
 *
 * Never throws. `not_sent` only when undici never reached `onRequestStart` (it fires just before
 * the first byte is written) and the error can only happen before a request is written
 * (`classifyFailure`); a deadline that fires before `onRequestStart` aborts the request right there,
 * so nothing ever leaves. A response over `maxResponseBytes` is `sent_no_response`: the destination
 * received the request and answered, so the effect may have happened.
 */
import type { Dispatcher } from 'undici';
import { contentTypeOf } from './argument-document.js';
import { BodyStream } from './body-stream.js';
import { classifyFailure } from './classify-failure.js';
import { stripHopByHop } from './hop-by-hop.js';
import { formatAuthority } from './normalize-head.js';
import { isEventStream } from './sse-reader.js';
import type { UpstreamRequest, UpstreamResult } from './types.js';

const RESPONSE_TOO_LARGE = 'response_too_large';
const DEADLINE_EXCEEDED = 'deadline_exceeded';

class ResponseTooLargeError extends Error {
  readonly code = RESPONSE_TOO_LARGE;
}

class DeadlineExceededError extends Error {
  readonly code = DEADLINE_EXCEEDED;
}

/** The agent stopped reading a streamed answer: the upstream request is aborted with it. */
class ClientClosedError extends Error {
  readonly code = 'client_closed';
}

export interface BufferedDispatchOptions {
  readonly maxResponseBytes: number;
  /** Per-request undici timeouts, when the dispatcher's own should not apply. */
  readonly headersTimeout?: number;
  readonly bodyTimeout?: number;
}

/**
 * The request headers as given, minus what must not or cannot be forwarded: hop-by-hop fields
 * (RFC 9110 §7.6.1), `Expect` (the gate answered `100 Continue` itself, RFC 9110 §10.1.1, and
 * undici refuses the field) and `Content-Length`, recomputed from the buffered body.
 */
function outgoingHeaders(request: UpstreamRequest, bodyLength: number): Record<string, string | string[]> {
  const out = stripHopByHop(request.headers);
  delete out['expect'];
  out['content-length'] = String(bodyLength);
  return out;
}

export function dispatchBuffered(
  dispatch: Dispatcher.Dispatch,
  request: UpstreamRequest,
  options: BufferedDispatchOptions,
): Promise<UpstreamResult> {
  return new Promise<UpstreamResult>((resolve) => {
    const limit = options.maxResponseBytes;
    let started = false;
    let expired = false;
    let settled = false;
    let controller: Dispatcher.DispatchController | null = null;
    let status = 0;
    let headers: Record<string, string | string[]> = {};
    const chunks: Buffer[] = [];
    let size = 0;
    let deadline: NodeJS.Timeout | undefined;
    /** Set once a `text/event-stream` answer is flowing (`streamEvents`): the rest goes there. */
    let stream: BodyStream | null = null;
    const settle = (result: UpstreamResult): void => {
      if (settled) return;
      settled = true;
      // A streamed answer stays under the deadline until its last byte.
      if (result.kind !== 'stream') clearTimeout(deadline);
      resolve(result);
    };
    if (request.deadlineMs !== undefined) {
      deadline = setTimeout(
        () => {
          expired = true;
          if (stream !== null) {
            controller?.abort(new DeadlineExceededError(DEADLINE_EXCEEDED));
            return;
          }
          settle({
            kind: 'failure',
            dispatchState: started ? 'sent_no_response' : 'not_sent',
            timedOut: true,
            error: DEADLINE_EXCEEDED,
          });
          controller?.abort(new DeadlineExceededError());
        },
        Math.max(0, request.deadlineMs),
      );
    }
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: (c) => {
        controller = c;
        // undici checks for an abort right after this callback, before the first byte is written.
        if (expired) {
          c.abort(new DeadlineExceededError());
          return;
        }
        started = true;
      },
      onResponseStart: (c, statusCode, responseHeaders) => {
        // 1xx interim responses (100 Continue, 103 Early Hints) are not the answer.
        if (statusCode < 200) return;
        status = statusCode;
        headers = stripHopByHop(responseHeaders);
        if (request.streamEvents === true && statusCode < 300 && isEventStream(contentTypeOf({ headers }))) {
          const flowing = new BodyStream({
            pause: () => c.pause(),
            resume: () => c.resume(),
            cancel: (reason) => c.abort(new ClientClosedError(reason)),
          });
          stream = flowing;
          settle({ kind: 'stream', status, headers, body: flowing });
          return;
        }
        const declared = Number(responseHeaders['content-length']);
        if (Number.isFinite(declared) && declared > limit) c.abort(new ResponseTooLargeError());
      },
      onResponseData: (c, chunk) => {
        if (stream !== null) {
          // Bounded by backpressure, not by a size: an event stream may run as long as the call.
          stream.push(chunk);
          return;
        }
        size += chunk.length;
        if (size > limit) {
          c.abort(new ResponseTooLargeError());
          return;
        }
        chunks.push(chunk);
      },
      onResponseEnd: () => {
        if (stream !== null) {
          clearTimeout(deadline);
          stream.finish({ kind: 'ended' });
          return;
        }
        settle({ kind: 'response', status, headers, body: Buffer.concat(chunks, size) });
      },
      onResponseError: (_c, err) => {
        if (stream !== null) {
          clearTimeout(deadline);
          stream.finish({ kind: 'failed', error: err });
          return;
        }
        if (err instanceof ResponseTooLargeError) {
          settle({
            kind: 'failure',
            dispatchState: 'sent_no_response',
            timedOut: false,
            error: RESPONSE_TOO_LARGE,
          });
          return;
        }
        settle(classifyFailure(err, started));
      },
    };
    const body = Buffer.from(request.body.buffer, request.body.byteOffset, request.body.byteLength);
    try {
      dispatch(
        {
          origin: `${request.scheme}://${formatAuthority(request.host, request.port)}`,
          path: request.pathAndQuery,
          method: request.method as Dispatcher.HttpMethod,
          headers: outgoingHeaders(request, body.byteLength),
          body: body.byteLength > 0 ? body : null,
          ...(options.headersTimeout === undefined ? {} : { headersTimeout: options.headersTimeout }),
          ...(options.bodyTimeout === undefined ? {} : { bodyTimeout: options.bodyTimeout }),
        },
        handler,
      );
    } catch (err) {
      settle(classifyFailure(err, started));
    }
  });
}
