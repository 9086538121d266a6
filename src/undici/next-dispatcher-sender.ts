/** The engine's `UpstreamSender` for the interceptor: dispatches through the next dispatcher in the chain. */
import type { Dispatcher } from 'undici';
import {
  classifyFailure,
  formatAuthority,
  stripHopByHop,
  type UpstreamRequest,
  type UpstreamResult,
  type UpstreamSender,
} from '../engine/index.js';

type Dispatch = Dispatcher.Dispatch;
type DispatchOptions = Dispatcher.DispatchOptions;
type Handler = Dispatcher.DispatchHandler;

export class ResponseTooLargeError extends Error {
  readonly code = 'response_too_large';
}

export class DeadlineExceededError extends Error {
  readonly code = 'deadline_exceeded';
}

/**
 * A sender like the proxy's upstream client (`src/proxy/upstream-client.ts`): complete body in,
 * complete response out, never a throw; `not_sent` only when undici never reached
 * `onRequestStart` (it fires just before the first byte is written) and the error can only happen
 * before a request is written (`classifyFailure`).
 */
export function createSender(dispatch: Dispatch, opts: DispatchOptions, limit: number): UpstreamSender {
  return (request: UpstreamRequest) =>
    new Promise<UpstreamResult>((resolve) => {
      let started = false;
      let expired = false;
      let settled = false;
      let controller: Dispatcher.DispatchController | null = null;
      let status = 0;
      let headers: Record<string, string | string[]> = {};
      const chunks: Buffer[] = [];
      let size = 0;
      let deadline: NodeJS.Timeout | undefined;
      const settle = (result: UpstreamResult): void => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        resolve(result);
      };
      if (request.deadlineMs !== undefined) {
        deadline = setTimeout(
          () => {
            expired = true;
            settle({
              kind: 'failure',
              dispatchState: started ? 'sent_no_response' : 'not_sent',
              timedOut: true,
              error: 'deadline_exceeded',
            });
            controller?.abort(new DeadlineExceededError());
          },
          Math.max(0, request.deadlineMs),
        );
      }
      const handler: Handler = {
        onRequestStart: (c) => {
          controller = c;
          if (expired) {
            c.abort(new DeadlineExceededError());
            return;
          }
          started = true;
        },
        onResponseStart: (c, statusCode, responseHeaders) => {
          if (statusCode < 200) return;
          status = statusCode;
          headers = stripHopByHop(responseHeaders);
          const declared = Number(responseHeaders['content-length']);
          if (Number.isFinite(declared) && declared > limit) c.abort(new ResponseTooLargeError());
        },
        onResponseData: (c, chunk) => {
          size += chunk.length;
          if (size > limit) {
            c.abort(new ResponseTooLargeError());
            return;
          }
          chunks.push(chunk);
        },
        onResponseEnd: () => {
          settle({ kind: 'response', status, headers, body: Buffer.concat(chunks, size) });
        },
        onResponseError: (_c, err) => {
          if (err instanceof ResponseTooLargeError) {
            settle({ kind: 'failure', dispatchState: 'sent_no_response', timedOut: false, error: err.code });
            return;
          }
          settle(classifyFailure(err, started));
        },
      };
      const body = Buffer.from(request.body.buffer, request.body.byteOffset, request.body.byteLength);
      const out: Record<string, string | string[]> = { ...request.headers };
      delete out['expect'];
      out['content-length'] = String(body.byteLength);
      try {
        dispatch(
          {
            origin: `${request.scheme}://${formatAuthority(request.host, request.port)}`,
            path: request.pathAndQuery,
            method: request.method as Dispatcher.HttpMethod,
            headers: out,
            body: body.byteLength > 0 ? body : null,
            headersTimeout: opts.headersTimeout,
            bodyTimeout: opts.bodyTimeout,
          },
          handler,
        );
      } catch (err) {
        settle(classifyFailure(err, started));
      }
    });
}
