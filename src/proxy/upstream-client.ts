/**
 * Upstream dispatch for the forward proxy, on undici keep-alive pools (one per origin, unlimited
 * connections, no pipelining so one failure never takes a neighbour's request down with it).
 *
 * - `send()` is the governed path: complete body in, complete response out, never a redirect
 *   followed, never a throw; failures say whether anything can have reached the destination.
 * - `stream()` is the ungoverned path: bytes flow both ways without being buffered.
 */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { rootCertificates } from 'node:tls';
import { Agent, type Dispatcher } from 'undici';
import type { HeaderMap, UpstreamRequest, UpstreamResult, UpstreamSender } from '../engine/index.js';
import {
  classifyFailure,
  errorCode,
  formatAuthority,
  isTimeoutCode,
  stripHopByHop,
  upstreamFailedResponse,
} from '../engine/index.js';
import { writeGateResponse } from './write-response.js';

export interface UpstreamClientOptions {
  /** TCP + TLS connect timeout; undici's default (10 s) when absent. */
  readonly connectTimeoutMs?: number;
  /** Time allowed for the response head once the request is sent. Default 30 s. */
  readonly headersTimeoutMs?: number;
  /** Longest silence allowed between two response body chunks. Default 30 s. */
  readonly bodyTimeoutMs?: number;
  /** Largest governed response body buffered by `send()`. Default 8 MiB. */
  readonly maxResponseBytes?: number;
  /**
   * Extra trust anchors (PEM) for HTTPS upstreams, e.g. `--upstream-ca`: trusted IN ADDITION to the
   * system roots (Node's own `ca` option would replace them, so they are added back here).
   */
  readonly ca?: string | Buffer;
}

/**
 * An ungoverned request: the head is normalized, the body is the client's, streamed as it comes.
 * `headers` are a `GateRequestHead`'s (already a private copy without hop-by-hop fields) and are
 * sent as they are: the ungoverned path copies the client's header map once, in `normalizeHead`.
 */
export interface StreamRequest extends Omit<UpstreamRequest, 'body' | 'headers' | 'deadlineMs'> {
  readonly headers: HeaderMap;
  readonly body: Readable | null;
}

export interface UpstreamClient {
  /** Governed dispatch; never throws, never follows redirects. */
  readonly send: UpstreamSender;
  /** Ungoverned dispatch straight into `res`; resolves when done, never rejects. */
  stream(request: StreamRequest, res: ServerResponse): Promise<void>;
  /** Closes the pools once in-flight requests are done. */
  close(): Promise<void>;
}

export const DEFAULT_HEADERS_TIMEOUT_MS = 30_000;
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

/**
 * A response body bigger than the limit is a failure `sent_no_response`, not `not_sent`: the
 * request was delivered and the destination answered, so the effect may well have happened; the
 * gate only could not keep the answer.
 */
const RESPONSE_TOO_LARGE = 'response_too_large';

class ResponseTooLargeError extends Error {
  readonly code = RESPONSE_TOO_LARGE;
}

/** `UpstreamRequest.deadlineMs` ran out; always reported with `timedOut: true`. */
const DEADLINE_EXCEEDED = 'deadline_exceeded';

class DeadlineExceededError extends Error {
  readonly code = DEADLINE_EXCEEDED;
}

export function createUpstreamClient(options: UpstreamClientOptions = {}): UpstreamClient {
  return new UndiciUpstreamClient(options);
}

class UndiciUpstreamClient implements UpstreamClient {
  readonly #agent: Agent;
  readonly #maxResponseBytes: number;
  #closing: Promise<void> | undefined;

  constructor(options: UpstreamClientOptions) {
    this.#maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    const connect: { timeout?: number; ca?: string | Buffer } = {};
    if (options.connectTimeoutMs !== undefined) connect.timeout = options.connectTimeoutMs;
    if (options.ca !== undefined) connect.ca = [...rootCertificates, String(options.ca)].join('\n');
    this.#agent = new Agent({
      connections: null,
      pipelining: 1,
      headersTimeout: options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS,
      bodyTimeout: options.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS,
      connect,
    });
  }

  readonly send: UpstreamSender = (request) =>
    new Promise<UpstreamResult>((resolve) => {
      const limit = this.#maxResponseBytes;
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
            // Classified like every other failure: before `onRequestStart` nothing can have left the
            // gate, and `expired` makes sure nothing ever will (the request is aborted the moment
            // undici would start writing it); after it, the effect may have happened.
            expired = true;
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
        onResponseStart: (controller, statusCode, responseHeaders) => {
          // 1xx interim responses (100 Continue, 103 Early Hints) are not the answer.
          if (statusCode < 200) return;
          status = statusCode;
          headers = stripHopByHop(responseHeaders);
          const declared = Number(responseHeaders['content-length']);
          if (Number.isFinite(declared) && declared > limit) controller.abort(new ResponseTooLargeError());
        },
        onResponseData: (controller, chunk) => {
          size += chunk.length;
          if (size > limit) {
            controller.abort(new ResponseTooLargeError());
            return;
          }
          chunks.push(chunk);
        },
        onResponseEnd: () => {
          settle({ kind: 'response', status, headers, body: Buffer.concat(chunks, size) });
        },
        onResponseError: (_controller, err) => {
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
        this.#agent.dispatch(
          {
            origin: originOf(request.scheme, request.host, request.port),
            path: request.pathAndQuery,
            method: request.method,
            headers: outgoingHeaders(request.headers, body.byteLength),
            body: body.byteLength > 0 ? body : null,
          },
          handler,
        );
      } catch (err) {
        settle(classifyFailure(err, started));
      }
    });

  async stream(request: StreamRequest, res: ServerResponse): Promise<void> {
    let headWritten = false;
    try {
      await this.#agent.stream(
        {
          origin: originOf(request.scheme, request.host, request.port),
          path: request.pathAndQuery,
          method: request.method,
          headers: streamHeaders(request.headers),
          body: request.body,
          opaque: res,
        },
        ({ statusCode, headers, opaque }) => {
          headWritten = true;
          opaque.writeHead(statusCode, stripHopByHop(headers));
          // undici writes the body into `res` with backpressure and ends it; a client that goes
          // away destroys `res`, which aborts the upstream request.
          return opaque;
        },
      );
    } catch (err) {
      if (res.destroyed || res.writableEnded) return;
      if (!headWritten && !res.headersSent) {
        const code = errorCode(err);
        writeGateResponse(res, upstreamFailedResponse(code, isTimeoutCode(code)), request.method);
        return;
      }
      // Part of the response already went out: the only honest signal left is a cut connection.
      res.destroy();
    }
  }

  close(): Promise<void> {
    this.#closing ??= this.#agent.close();
    return this.#closing;
  }
}

function originOf(scheme: 'http' | 'https', host: string, port: number): string {
  return `${scheme}://${formatAuthority(host, port)}`;
}

/**
 * The request headers as given, minus what must not or cannot be forwarded: hop-by-hop fields
 * (RFC 9110 §7.6.1), `Expect` (the gate answered `100 Continue` itself, RFC 9110 §10.1.1, and
 * undici refuses the field) and `Content-Length`, recomputed from the buffered body.
 */
function outgoingHeaders(headers: HeaderMap, bodyLength: number): Record<string, string | string[]> {
  const out = stripHopByHop(headers);
  delete out['expect'];
  delete out['content-length'];
  out['content-length'] = String(bodyLength);
  return out;
}

/**
 * Headers of a streamed request, normalized already: sent as they are (undici skips `undefined`
 * values; Content-Length is the client's), except `Expect`, which forces the one copy.
 */
function streamHeaders(headers: HeaderMap): HeaderMap {
  if (headers['expect'] === undefined) return headers;
  const { expect: _answeredByTheGate, ...rest } = headers;
  return rest;
}
