/**
 * Upstream dispatch for the forward proxy, on undici keep-alive pools (one per origin, unlimited
 * connections, no pipelining so one failure never takes a neighbour's request down with it).
 *
 * - `send()` is the governed path: complete body in, complete response out, never a redirect
 *   followed, never a throw; failures say whether anything can have reached the destination.
 * - `stream()` is the ungoverned path: bytes flow both ways without being buffered.
 */
import type { ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import type { Readable } from 'node:stream';
import { rootCertificates } from 'node:tls';
import { Agent, buildConnector } from 'undici';
import type { GateLogger, HeaderMap, UpstreamRequest, UpstreamSender } from '../engine/index.js';
import {
  destinationRefusedResponse,
  dispatchBuffered,
  errorCode,
  formatAuthority,
  isTimeoutCode,
  isTlsVerificationFailure,
  stripHopByHop,
  upstreamFailedResponse,
  withoutGateHeaders,
} from '../engine/index.js';
import { type DestinationGuard, DestinationRefusedError } from './destination-guard.js';
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
  /**
   * The `egress` policy: every connect's resolved address is checked before the socket connects.
   * Absent: nothing is checked (the proxy always passes one).
   */
  readonly guard?: DestinationGuard;
  /** Where a destination whose TLS certificate does not verify is reported (once per host). */
  readonly logger?: GateLogger | undefined;
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

export function createUpstreamClient(options: UpstreamClientOptions = {}): UpstreamClient {
  return new UndiciUpstreamClient(options);
}

/** Hosts whose certificate failure was logged; past it, new ones are no longer remembered. */
const MAX_TLS_HOSTS_LOGGED = 1024;

class UndiciUpstreamClient implements UpstreamClient {
  readonly #agent: Agent;
  readonly #maxResponseBytes: number;
  readonly #logger: GateLogger | undefined;
  readonly #tlsLogged = new Set<string>();
  readonly #extraCa: boolean;
  #closing: Promise<void> | undefined;

  constructor(options: UpstreamClientOptions) {
    this.#maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.#logger = options.logger;
    this.#extraCa = options.ca !== undefined;
    const connect: { timeout?: number; ca?: string | Buffer } = {};
    if (options.connectTimeoutMs !== undefined) connect.timeout = options.connectTimeoutMs;
    if (options.ca !== undefined) connect.ca = [...rootCertificates, String(options.ca)].join('\n');
    this.#agent = new Agent({
      connections: null,
      pipelining: 1,
      headersTimeout: options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS,
      bodyTimeout: options.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS,
      connect: options.guard === undefined ? connect : guardedConnector(connect, options.guard),
    });
  }

  readonly send: UpstreamSender = async (request) => {
    const result = await dispatchBuffered((opts, handler) => this.#agent.dispatch(opts, handler), request, {
      maxResponseBytes: this.#maxResponseBytes,
    });
    if (result.kind === 'failure') this.#noteFailure(result.error, request);
    return result;
  };

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
          // `Effectgate-*` is the gate's namespace: a destination never speaks in it, even ungoverned.
          opaque.writeHead(statusCode, withoutGateHeaders(stripHopByHop(headers)));
          // undici writes the body into `res` with backpressure and ends it; a client that goes
          // away destroys `res`, which aborts the upstream request.
          return opaque;
        },
      );
    } catch (err) {
      if (res.destroyed || res.writableEnded) return;
      if (!headWritten && !res.headersSent) {
        if (err instanceof DestinationRefusedError) {
          writeGateResponse(res, destinationRefusedResponse(err.reason), request.method);
          return;
        }
        const code = errorCode(err);
        this.#noteFailure(code, request);
        writeGateResponse(res, upstreamFailedResponse(code, isTimeoutCode(code)), request.method);
        return;
      }
      // Part of the response already went out: the only honest signal left is a cut connection.
      res.destroy();
    }
  }

  /**
   * A certificate that does not verify is the operator's to fix (`--upstream-ca`), and every retry
   * fails the same way until then: one warning per host and code says so, not one per request.
   */
  #noteFailure(code: string, request: { readonly host: string; readonly port: number }): void {
    if (this.#logger === undefined || !isTlsVerificationFailure(code)) return;
    const host = formatAuthority(request.host, request.port);
    const seen = `${host} ${code}`;
    if (this.#tlsLogged.has(seen)) return;
    if (this.#tlsLogged.size < MAX_TLS_HOSTS_LOGGED) this.#tlsLogged.add(seen);
    this.#logger.warn(
      { host, error: code, upstream_ca: this.#extraCa },
      `the TLS certificate of ${host} does not verify (${code}): every request to it fails before anything is sent (a private or self-signed CA must be given to the gate with --upstream-ca FILE); logged once per host`,
    );
  }

  close(): Promise<void> {
    this.#closing ??= this.#agent.close();
    return this.#closing;
  }
}

/**
 * undici's own connector, with the egress check: an IP literal before the socket exists, a name
 * in the socket's `lookup` (one connector per port, as `lookup` is not told the port). A host
 * `--resolve` sends elsewhere is dialled there, checked there, and still named in TLS (SNI and the
 * certificate check); the pool, the `Host` header and everything recorded keep its name.
 */
function guardedConnector(
  options: buildConnector.BuildOptions,
  guard: DestinationGuard,
): buildConnector.connector {
  const byPort = new Map<number, buildConnector.connector>();
  return (opts, callback) => {
    const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
    const dial = guard.dialTarget(opts.hostname, port);
    const refused = guard.refuseLiteral(dial.host, dial.port);
    if (refused !== null) {
      callback(refused, null);
      return;
    }
    let connector = byPort.get(dial.port);
    if (connector === undefined) {
      connector = buildConnector({
        ...options,
        lookup: guard.lookup(dial.port),
      } as buildConnector.BuildOptions);
      byPort.set(dial.port, connector);
    }
    if (dial.host === opts.hostname && dial.port === port) {
      connector(opts, callback);
      return;
    }
    const servername = opts.servername ?? (isIP(opts.hostname) === 0 ? opts.hostname : undefined);
    connector(
      {
        ...opts,
        hostname: dial.host,
        host: formatAuthority(dial.host, dial.port),
        port: String(dial.port),
        ...(servername === undefined || servername === null ? {} : { servername }),
      },
      callback,
    );
  };
}

function originOf(scheme: 'http' | 'https', host: string, port: number): string {
  return `${scheme}://${formatAuthority(host, port)}`;
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
