/**
 * The transport-agnostic shapes the adapters (forward proxy, undici interceptor) translate to and
 * from. Adapters never decide verdicts: they call `Gate.route()` on the request head, stream
 * ungoverned traffic themselves, and hand governed requests (body buffered) to `Gate.handle()`.
 */
import type { DispatchState, Scope } from '../store/index.js';
import type { BodyStream, GateBodyStream } from './body-stream.js';

/** Header values as node:http gives them: lower-case names. */
export type HeaderMap = Record<string, string | string[] | undefined>;

/** Optional context from agent-aware clients (`Effectgate-*` request headers, docs/design.md §4.2). */
export interface GateContext {
  readonly run: string | null;
  readonly step: string | null;
  readonly operation: string | null;
  readonly worker: string | null;
  readonly agentVersion: string | null;
  readonly retryReason: string | null;
}

/** A request head, normalized: no hop-by-hop, `Proxy-*` or `Effectgate-*` headers left in `headers`. */
export interface GateRequestHead {
  readonly scheme: 'http' | 'https';
  /** Upper-case. */
  readonly method: string;
  /** Lower-case host name; IPv6 literal without brackets. */
  readonly host: string;
  readonly port: number;
  /** Path without query, normalized (RFC 3986 §6.2.2: unreserved %xx decoded, dot segments removed). */
  readonly path: string;
  /** Raw query string without `?`, `''` when none. */
  readonly query: string;
  /** End-to-end request headers to forward (lower-case names). */
  readonly headers: HeaderMap;
  readonly context: GateContext;
  /**
   * The scope of this request, set ONLY by an adapter from an authenticated credential (the proxy's
   * agents file); `normalizeHead` never sets it and no request header can. Absent: the gate's own
   * scope (sidecar flags, constructor options).
   */
  readonly scope?: Scope;
  /**
   * The client's network address (the proxy's peer), set ONLY by an adapter; absent in process.
   * With the scope, it names the run of a request that sends no `Effectgate-Run` (run-identity.ts).
   */
  readonly client?: string;
}

export interface GateRequest extends GateRequestHead {
  /** The complete request body (empty when none). */
  readonly body: Uint8Array;
}

/** What the engine asks an adapter to send upstream. Headers are final: send them as they are. */
export interface UpstreamRequest {
  readonly scheme: 'http' | 'https';
  readonly method: string;
  readonly host: string;
  readonly port: number;
  /** Path plus `?query` when there is one. */
  readonly pathAndQuery: string;
  readonly headers: Record<string, string | string[]>;
  readonly body: Uint8Array;
  /**
   * Abort the whole exchange after this many ms (the engine passes less than the key's
   * pending_ttl, so a reservation can never expire while its dispatch is still in flight); the
   * failure is `sent_no_response` with timedOut true unless nothing was sent yet.
   */
  readonly deadlineMs?: number;
  /**
   * Stream a 2xx `text/event-stream` answer instead of buffering it (JSON-RPC tools: MCP progress
   * notifications reach the agent as they come); the result is then `kind: 'stream'`.
   */
  readonly streamEvents?: boolean;
}

export type UpstreamResult =
  | {
      readonly kind: 'response';
      readonly status: number;
      /** End-to-end response headers (hop-by-hop already removed), lower-case names. */
      readonly headers: Record<string, string | string[]>;
      readonly body: Uint8Array;
    }
  /** A `text/event-stream` answer flowing as it arrives (`streamEvents`); the deadline still applies. */
  | {
      readonly kind: 'stream';
      readonly status: number;
      readonly headers: Record<string, string | string[]>;
      readonly body: BodyStream;
    }
  | {
      readonly kind: 'failure';
      /** `not_sent` only when nothing left the gate; when unsure, `sent_no_response`. */
      readonly dispatchState: Extract<DispatchState, 'not_sent' | 'sent_no_response'>;
      readonly timedOut: boolean;
      /** Short description, e.g. `ECONNREFUSED` or `UND_ERR_HEADERS_TIMEOUT`; never a secret. */
      readonly error: string;
    };

/** Sends one request upstream, buffering the response; never follows redirects; never throws. */
export type UpstreamSender = (request: UpstreamRequest) => Promise<UpstreamResult>;

/** A complete response made by the gate (a verdict) or relayed from the upstream (an allow). */
export interface GateResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[]>;
  readonly body: Uint8Array;
  /**
   * Set on a streamed answer: the adapter writes the head, then these chunks as they come (`body`
   * is empty), and calls `cancel()` if the client goes away first.
   */
  readonly stream?: GateBodyStream;
}

/** What `Gate.route()` says about a request head, without touching the store. */
export type RouteDecision =
  /** No tool can match: stream it through untouched. */
  | { readonly kind: 'pass' }
  /** Refused without a store round trip (`default: block`); send `response`. */
  | { readonly kind: 'refuse'; readonly response: GateResponse }
  /** Some tool's route matches: buffer the body (up to `maxBodyBytes`) and call `Gate.handle()`. */
  | { readonly kind: 'govern'; readonly maxBodyBytes: number };

/** Transport-level refusals made by the gate itself, before the engine can classify. */
export type TransportProblem = 'body_too_large' | 'bad_request' | 'proxy_auth_required';

/**
 * What adapters talk to. `handle()` never throws: a store outage is answered 503 (fail closed), an
 * upstream without a usable response 502/504, all as `application/problem+json`.
 */
export interface GateHandler {
  route(head: GateRequestHead): RouteDecision;
  /**
   * Optional: what must be looked up before `route()` can answer for a tunnel to `host:port`
   * (null when nothing). A proxy awaits it before routing a CONNECT or an SNI.
   */
  prepare?(host: string, port: number): Promise<void> | null;
  handle(request: GateRequest, send: UpstreamSender): Promise<GateResponse>;
  refuse(head: GateRequestHead | null, problem: TransportProblem, detail: string): GateResponse;
}
