/**
 * A stand-in `GateHandler` for transport tests only: it routes by `host:port` (or host) and, when
 * governing, calls `send()` and relays the result (200-as-given, or 502 with the failure). It
 * records what it saw so tests can assert on the shapes the proxy produced.
 */
import type {
  GateHandler,
  GateRequest,
  GateRequestHead,
  GateResponse,
  RouteDecision,
  TransportProblem,
  UpstreamResult,
  UpstreamSender,
} from '../../../src/engine/types.js';

const encoder = new TextEncoder();

export interface FakeGateOptions {
  /** `host` or `host:port` entries whose requests are governed. */
  readonly govern?: readonly string[];
  /** `host` or `host:port` entries refused at route time (403). */
  readonly refuse?: readonly string[];
  readonly maxBodyBytes?: number;
}

export class FakeGate implements GateHandler {
  readonly routed: GateRequestHead[] = [];
  readonly handled: GateRequest[] = [];
  readonly results: UpstreamResult[] = [];
  readonly refusals: { problem: TransportProblem; detail: string }[] = [];
  readonly #govern: ReadonlySet<string>;
  readonly #refuse: ReadonlySet<string>;
  readonly #maxBodyBytes: number;

  constructor(options: FakeGateOptions = {}) {
    this.#govern = new Set(options.govern ?? []);
    this.#refuse = new Set(options.refuse ?? []);
    this.#maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  }

  route(head: GateRequestHead): RouteDecision {
    this.routed.push(head);
    if (matches(this.#refuse, head)) return { kind: 'refuse', response: json(403, { verdict: 'block' }) };
    if (matches(this.#govern, head)) return { kind: 'govern', maxBodyBytes: this.#maxBodyBytes };
    return { kind: 'pass' };
  }

  async handle(request: GateRequest, send: UpstreamSender): Promise<GateResponse> {
    this.handled.push(request);
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(request.headers)) if (v !== undefined) headers[k] = v;
    headers['idempotency-key'] = 'fake-key';
    const result = await send({
      scheme: request.scheme,
      method: request.method,
      host: request.host,
      port: request.port,
      pathAndQuery: request.query === '' ? request.path : `${request.path}?${request.query}`,
      headers,
      body: request.body,
    });
    this.results.push(result);
    if (result.kind === 'response') {
      return {
        status: result.status,
        headers: { ...result.headers, 'effectgate-verdict': 'allow' },
        body: result.body,
      };
    }
    if (result.kind !== 'failure') throw new Error('the fake gate never asks for a stream');
    return json(result.timedOut ? 504 : 502, { dispatch_state: result.dispatchState, error: result.error });
  }

  refuse(_head: GateRequestHead | null, problem: TransportProblem, detail: string): GateResponse {
    this.refusals.push({ problem, detail });
    const status = { body_too_large: 413, bad_request: 400, proxy_auth_required: 407 }[problem];
    return {
      status,
      headers: { 'content-type': 'application/problem+json' },
      body: encoder.encode(JSON.stringify({ type: `urn:effectgate:problem:${problem}`, status, detail })),
    };
  }
}

function matches(set: ReadonlySet<string>, head: GateRequestHead): boolean {
  return set.has(head.host) || set.has(`${head.host}:${head.port}`);
}

function json(status: number, body: unknown): GateResponse {
  return {
    status,
    headers: { 'content-type': 'application/json' },
    body: encoder.encode(JSON.stringify(body)),
  };
}
