import {
  canonicalJson,
  createGate,
  type Gate,
  type GateRequest,
  type GateResponse,
  normalizeHead,
  type UpstreamResult,
  type UpstreamSender,
} from '../engine/index.js';
import { type ExampleResponse, type PolicyExample, type PolicySet, policyExamples } from '../policy/index.js';

/** What one example got, and what it expected but did not get (empty when it passed). */
export interface ExampleResult {
  readonly file: string;
  readonly line: number;
  readonly name: string;
  readonly ok: boolean;
  readonly failures: readonly string[];
  readonly got: {
    readonly tool: string | null;
    readonly key: readonly unknown[] | null;
    readonly first: string;
    readonly second: string | null;
    readonly status: number;
    /** How many times the fake destination was called. */
    readonly sent: number;
  };
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Runs every example of `set` in process: one gate on a throwaway in-memory store, a fake
 * destination (no socket, no DNS), each example in a tenant of its own so no example's key or
 * loop-breaker count leaks into the next. Sends the request once, and again when the example says
 * what the second answer is, then reads the tool and key the store recorded.
 */
export async function runPolicyExamples(set: PolicySet): Promise<ExampleResult[]> {
  const examples = policyExamples(set);
  if (examples.length === 0) return [];
  const gate = await createGate({
    policies: set,
    store: 'pglite:memory',
    scope: { tenant: 'policies-test', area: 'examples', agent: 'policies-test' },
    instanceId: 'policies-test',
    // No network: the examples' hosts need not resolve (and usually do not, offline).
    resolveGovernedHosts: 'off',
    analysisThreads: 0,
    authorityKey: 'policies-test',
    storeSocket: false,
  });
  try {
    const results: ExampleResult[] = [];
    for (const [i, example] of examples.entries()) results.push(await runOne(gate, example, i + 1));
    return results;
  } finally {
    await gate.close();
  }
}

async function runOne(gate: Gate, example: PolicyExample, n: number): Promise<ExampleResult> {
  const tenant = `policies-test-${n}`;
  let sent = 0;
  const send: UpstreamSender = async () => {
    // The answers in order, the last one for any further request.
    const answer = example.responses[Math.min(sent, example.responses.length - 1)]!;
    sent++;
    return fakeAnswer(answer);
  };
  const request = gateRequest(example, tenant, `example-${n}`);
  const first = await answer(gate, request, send);
  const second = example.expect.second === null ? null : await answer(gate, request, send);
  const operations = await gate.store.listOperations({ tenant });
  const named = first.headers['effectgate-operation'];
  const operation = operations.find((o) => o.id === named) ?? operations[0] ?? null;
  const got = {
    tool: operation?.toolId ?? toolNamedBy(first),
    key: operation?.keyValues ?? null,
    first: verdictOf(first),
    second: second === null ? null : verdictOf(second),
    status: first.status,
    sent,
  };
  const want = example.expect;
  const failures: string[] = [];
  const differ = (what: string, expected: unknown, actual: unknown): void => {
    if (canonicalJson(expected ?? null) !== canonicalJson(actual ?? null))
      failures.push(
        `expected ${what} ${canonicalJson(expected ?? null)}, got ${canonicalJson(actual ?? null)}`,
      );
  };
  differ('tool', want.tool, got.tool);
  if (want.key !== null) differ('key', want.key, got.key);
  differ('first', want.first, got.first);
  if (want.second !== null) differ('second', want.second, got.second);
  if (want.status !== null) differ('status', want.status, got.status);
  if (want.sent !== null) differ('sent', want.sent, got.sent);
  return {
    file: example.at.file,
    line: example.at.line,
    name: example.name,
    ok: failures.length === 0,
    failures,
    got,
  };
}

/** Route first, as a front door does: a pass or a refusal never reaches `handle`. */
async function answer(gate: Gate, request: GateRequest, send: UpstreamSender): Promise<GateResponse> {
  const route = gate.route(request);
  if (route.kind === 'refuse') return route.response;
  if (route.kind === 'pass') {
    const r = await send({
      scheme: request.scheme,
      method: request.method,
      host: request.host,
      port: request.port,
      pathAndQuery: request.query === '' ? request.path : `${request.path}?${request.query}`,
      headers: {},
      body: request.body,
    });
    return r.kind === 'response' ? r : { status: 502, headers: {}, body: new Uint8Array() };
  }
  return gate.handle(request, send);
}

function gateRequest(example: PolicyExample, tenant: string, run: string): GateRequest {
  const { method, url, headers, body } = example.request;
  const scheme = url.protocol === 'https:' ? 'https' : 'http';
  const form =
    headers['content-type']?.toLowerCase().startsWith('application/x-www-form-urlencoded') === true;
  const all: Record<string, string> = { ...headers };
  if (body !== undefined && all['content-type'] === undefined) all['content-type'] = 'application/json';
  const head = normalizeHead({
    scheme,
    method,
    host: url.hostname,
    port: url.port === '' ? (scheme === 'https' ? 443 : 80) : Number(url.port),
    pathAndQuery: `${url.pathname}${url.search}`,
    headers: all,
  });
  return {
    ...head,
    // As an authenticated proxy agent would be: the example's own scope and, unless it names one, run.
    scope: { tenant, area: 'examples', agent: 'policies-test' },
    context: { ...head.context, run: head.context.run ?? run },
    body:
      body === undefined ? new Uint8Array() : encoder.encode(form ? formText(body) : JSON.stringify(body)),
  };
}

/** A mapping body of a form request is sent form-encoded (Stripe's API takes only that). */
function formText(body: unknown): string {
  if (typeof body === 'string') return body;
  const params = new URLSearchParams();
  if (body !== null && typeof body === 'object' && !Array.isArray(body))
    for (const [k, v] of Object.entries(body))
      params.append(k, typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v));
  return params.toString();
}

function fakeAnswer(answer: ExampleResponse): UpstreamResult {
  const { status, headers, body } = answer;
  return {
    kind: 'response',
    status,
    headers: { 'content-type': 'application/json', ...headers },
    body: encoder.encode(JSON.stringify(body)),
  };
}

function verdictOf(response: GateResponse): string {
  const v = response.headers['effectgate-verdict'];
  return (Array.isArray(v) ? v[0] : v) ?? 'pass';
}

/**
 * The tool a refusal names when no operation was made: problem body `tool`, a JSON-RPC error's
 * `data.tool`, or a vendor dialect's `effectgate.tool` (Slack, GitHub) or `error.effectgate.tool` (Stripe).
 */
function toolNamedBy(response: GateResponse): string | null {
  if (response.headers['effectgate-verdict'] === undefined) return null;
  try {
    const doc = JSON.parse(decoder.decode(response.body)) as {
      tool?: unknown;
      effectgate?: { tool?: unknown };
      error?: { data?: { tool?: unknown }; effectgate?: { tool?: unknown } };
    };
    const tool = doc.tool ?? doc.error?.data?.tool ?? doc.effectgate?.tool ?? doc.error?.effectgate?.tool;
    return typeof tool === 'string' ? tool : null;
  } catch {
    return null;
  }
}
