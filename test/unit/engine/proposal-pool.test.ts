/**
 * Body analysis on a worker thread: for every kind of request the worker's
 * proposal is the event loop's, field for field (the same tool, key, fingerprint, refusal), since
 * a key computed one way for small bodies and another way for large ones would let the second
 * spelling of one effect through. A worker that fails fails only its own request.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { BODY_LIMITS } from '../../../src/engine/json-scan.js';
import { type ProposalContext, type Proposed, propose } from '../../../src/engine/proposal.js';
import { AnalysisFailed, ProposalPool } from '../../../src/engine/proposal-pool.js';
import { RouteClassifier } from '../../../src/engine/route-classifier.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { Classifier, parsePolicyFiles, policySources } from '../../../src/policy/index.js';

const policies = parsePolicyFiles([
  {
    file: 'pool.yaml',
    text: `
version: 1
tools:
  - id: shop.refund
    match: { hosts: [shop.example], method: POST, path: "/orders/{order}/refunds" }
    effect: financial
    dedupe: { key: [$.path.order, $.body.amount, $.query.currency], window: 24h }
    fingerprint: { ignore: [$.body.note] }
    redact: [$.body.card]
  - id: shop.delete
    match: { hosts: [shop.example], method: DELETE, path: "/orders/{order}" }
    effect: destroy
    dedupe: { key: [$.path.order, $.body.reason], window: 24h, on_missing: block }
  - id: mcp.create_ticket
    match:
      hosts: [shop.example]
      method: POST
      path: /mcp
      body: { "$.method": tools/call, "$.params.name": create_ticket }
    effect: create
    dedupe: { key: [$.body.params.arguments.subject], window: 1h }
    verdict: { protocol: jsonrpc }
  - id: shop.graphql.refund
    match: { hosts: [shop.example], method: POST, path: /graphql, graphql: { mutation: refundCreate } }
    effect: financial
    dedupe: { key: [$.graphql.args.input.order, $.graphql.args.input.amount], window: 24h }
`,
  },
]);
const scope = { tenant: 'acme', area: 'shop', agent: 'bot' };
const settings = {
  scope,
  authorityKey: 'k3y',
  bodyLimits: BODY_LIMITS,
  maxDuplicateSkips: policies.loopBreaker.maxDuplicateSkips,
};
/** What every pool here is given besides its settings. */
const compiled = { sources: policySources(policies) ?? [], tools: policies.tools };
const classifier = new Classifier(policies);
/** `shop.example` is also reached as 192.0.2.7 (what GovernedAddresses would have found). */
const namesFor = (host: string): readonly string[] => (host === '192.0.2.7' ? ['shop.example'] : []);
const ctx: ProposalContext = {
  ...settings,
  classifier,
  routes: new RouteClassifier(classifier, { namesFor }),
};

function req(over: Partial<GateRequest> & { readonly text?: string }): GateRequest {
  const { text, ...rest } = over;
  return {
    scheme: 'https',
    method: 'POST',
    host: 'shop.example',
    port: 443,
    path: '/orders/42/refunds',
    query: 'currency=eur',
    headers: { 'content-type': 'application/json', authorization: 'Bearer s3cret' },
    body: new TextEncoder().encode(text ?? ''),
    context: {
      run: 'run-1',
      step: null,
      operation: null,
      worker: null,
      agentVersion: null,
      retryReason: null,
    },
    ...rest,
  };
}

/** A proposal as data: the tool by id, the body as what it parses to. */
function plain(p: Proposed): unknown {
  if (p.kind !== 'proposal') return p;
  const { tool, args, ...rest } = p.proposal;
  return {
    ...rest,
    tool: tool.id,
    args: { path: args.path, query: args.query, body: args.body, graphql: args.graphql },
  };
}

const REFUND = 'mutation R($input: RefundInput!) { r: refundCreate(input: $input) { id } }';

const pad = 'x'.repeat(64 * 1024);
const cases: readonly (readonly [string, GateRequest])[] = [
  ['a keyed refund', req({ text: JSON.stringify({ amount: 5, note: pad, card: '4242' }) })],
  ['the same refund with members in another order', req({ text: `{"note":"${pad}","amount":5,"card":"9"}` })],
  ['addressed by IP', req({ host: '192.0.2.7', text: JSON.stringify({ amount: 5, note: pad }) })],
  ['a duplicate member', req({ text: `{"amount":5,"note":"${pad}","amount":6}` })],
  [
    'a body nested too deep',
    req({ text: `{"amount":5,"a":${'['.repeat(100)}${']'.repeat(100)},"n":"${pad}"}` }),
  ],
  ['too many nodes', req({ text: `[${'0,'.repeat(BODY_LIMITS.maxNodes)}0]` })],
  ['a non-finite number', req({ text: `{"amount":1e400,"note":"${pad}"}` })],
  ['not JSON', req({ text: `amount=5&note=${pad}`, headers: { 'content-type': 'text/plain' } })],
  [
    'a form overriding the method (`_method`), missing its key',
    req({
      path: '/orders/42',
      text: `_method=DELETE&note=${pad}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    }),
  ],
  [
    'a JSON-RPC call',
    req({
      path: '/mcp',
      query: '',
      text: JSON.stringify({
        jsonrpc: '2.0',
        id: 'r7',
        method: 'tools/call',
        params: { name: 'create_ticket', arguments: { subject: 'Disk', body: pad } },
      }),
    }),
  ],
  [
    'an unclassified JSON-RPC call',
    req({
      path: '/mcp',
      query: '',
      text: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', pad }),
    }),
  ],
  [
    'an unreadable body on a body-chosen route',
    req({ path: '/mcp', query: '', text: `[${JSON.stringify(pad)}]` }),
  ],
  [
    'a GraphQL mutation',
    req({
      path: '/graphql',
      query: '',
      text: JSON.stringify({ query: REFUND, variables: { input: { order: 42, amount: 5, note: pad } } }),
    }),
  ],
  [
    'a GraphQL document with two mutations',
    req({
      path: '/graphql',
      query: '',
      text: JSON.stringify({
        query: `mutation { a: refundCreate(input: {order: 1}) { id } b: refundCreate(input: {order: 2}) { id } } # ${pad}`,
      }),
    }),
  ],
  [
    'a GraphQL document that does not parse',
    req({ path: '/graphql', query: '', text: JSON.stringify({ query: `mutation { refundCreate( ${pad}` }) }),
  ],
  [
    'a GraphQL query',
    req({ path: '/graphql', query: '', text: JSON.stringify({ query: `{ refunds { id } } # ${pad}` }) }),
  ],
  [
    'a body matching only with member names case-folded',
    req({
      path: '/mcp',
      query: '',
      text: JSON.stringify({ Method: 'tools/call', params: { Name: 'create_ticket', pad } }),
    }),
  ],
];

describe('ProposalPool', () => {
  const errors: Error[] = [];
  const pool = new ProposalPool({
    ...compiled,
    threads: 1,
    setup: settings,
    onWorkerError: (e) => errors.push(e),
  });
  afterAll(() => pool.close());

  for (const [name, request] of cases) {
    it(`proposes on the worker exactly what the event loop proposes: ${name}`, async () => {
      const inline = propose(ctx, request);
      const offloaded = await pool.propose(request, namesFor(request.host));
      expect(plain(offloaded)).toEqual(plain(inline));
    });
  }

  it('keys a refund the same way whichever path computed it', async () => {
    const small = propose(ctx, req({ text: JSON.stringify({ amount: 5, note: 'short' }) }));
    const large = await pool.propose(req({ text: JSON.stringify({ amount: 5, note: pad }) }), []);
    if (small.kind !== 'proposal' || large.kind !== 'proposal') throw new Error('expected proposals');
    expect(large.proposal.key?.hash).toBe(small.proposal.key?.hash);
    // `note` is fingerprint.ignore'd: the large request is a retry of the small one, not a fork.
    expect(large.proposal.common.request.fingerprint).toBe(small.proposal.common.request.fingerprint);
    expect(large.proposal.rpcId).toBeNull();
    expect(errors).toEqual([]);
  });

  it('reads a GraphQL call on the worker: its key, its response name, its arguments again on demand', async () => {
    const text = JSON.stringify({ query: REFUND, variables: { input: { order: 42, amount: 5, note: pad } } });
    const large = await pool.propose(req({ path: '/graphql', query: '', text }), []);
    if (large.kind !== 'proposal') throw new Error(`expected a proposal, got ${large.kind}`);
    expect(large.proposal.tool.id).toBe('shop.graphql.refund');
    expect(large.proposal.key?.values).toEqual([42, 5]);
    expect(large.proposal.graphql).toEqual({ field: 'refundCreate', responseName: 'r' });
    expect(large.proposal.args.graphql?.args).toEqual({ input: { order: 42, amount: 5, note: pad } });
  });

  it('answers jobs in order, many at once', async () => {
    const requests = Array.from({ length: 20 }, (_, i) =>
      req({ text: JSON.stringify({ amount: i, note: pad }) }),
    );
    const out = await Promise.all(requests.map((r) => pool.propose(r, [])));
    expect(out.map((p) => (p.kind === 'proposal' ? p.proposal.key?.values : null))).toEqual(
      requests
        .map((_, i) => propose(ctx, requests[i] as GateRequest))
        .map((p) => (p.kind === 'proposal' ? p.proposal.key?.values : null)),
    );
  });
});

describe('ProposalPool failures', () => {
  it('fails only the request whose worker ran out of memory, then analyses the next on a new worker', async () => {
    const errors: Error[] = [];
    // A heap that holds the worker and a small body, not 10 MB of members parsed and copied.
    const pool = new ProposalPool({
      ...compiled,
      threads: 1,
      maxHeapMb: 32,
      setup: settings,
      onWorkerError: (e) => errors.push(e),
    });
    try {
      const members = Array.from({ length: 49_000 }, (_, i) => `"k${i}":"${'v'.repeat(200)}${i}"`).join(',');
      const huge = req({ text: `{"amount":5,${members}}` });
      await expect(pool.propose(huge, [])).rejects.toBeInstanceOf(AnalysisFailed);
      expect(errors.length).toBeGreaterThan(0);
      const next = await pool.propose(req({ text: JSON.stringify({ amount: 5, note: 'ok' }) }), []);
      expect(next.kind).toBe('proposal');
    } finally {
      await pool.close();
    }
  });

  it('fails a job running when the pool closes instead of leaving it unsettled', async () => {
    const pool = new ProposalPool({ ...compiled, threads: 1, setup: settings, onWorkerError: () => {} });
    // The worker is up first, so the first big job is running (≈100 ms of work) when close comes.
    await pool.propose(req({ text: JSON.stringify({ amount: 1, note: pad }) }), []);
    const members = Array.from({ length: 49_000 }, (_, i) => `"k${i}":0`).join(',');
    const running = pool.propose(req({ text: `{"amount":5,${members}}` }), []);
    const queued = pool.propose(req({ text: `{"amount":6,${members}}` }), []);
    const settled = Promise.allSettled([running, queued]);
    await new Promise((r) => setTimeout(r, 10));
    await pool.close();
    const [a, b] = await settled;
    expect(a).toMatchObject({ status: 'rejected', reason: { message: 'the gate is stopping' } });
    expect(b).toMatchObject({ status: 'rejected', reason: { message: 'the gate is stopping' } });
  });

  it('refuses a large body at once when the queue holds its byte bound, and takes one again when it drains', async () => {
    const pool = new ProposalPool({
      ...compiled,
      threads: 1,
      maxQueuedBytes: 100 * 1024,
      setup: settings,
      onWorkerError: () => {},
    });
    try {
      const body = (amount: number): GateRequest => req({ text: JSON.stringify({ amount, note: pad }) });
      const first = pool.propose(body(1), []);
      await expect(pool.propose(body(2), [])).rejects.toThrow(/already analysing \d+ KiB/);
      expect((await first).kind).toBe('proposal');
      expect((await pool.propose(body(3), [])).kind).toBe('proposal');
    } finally {
      await pool.close();
    }
  });

  it('fails a job past its deadline, terminating its worker, and runs the next on a new one', async () => {
    const errors: Error[] = [];
    const pool = new ProposalPool({
      ...compiled,
      threads: 1,
      jobTimeoutMs: 1,
      setup: settings,
      onWorkerError: (e) => errors.push(e),
    });
    try {
      const members = Array.from({ length: 49_000 }, (_, i) => `"k${i}":0`).join(',');
      await expect(pool.propose(req({ text: `{"amount":5,${members}}` }), [])).rejects.toThrow(
        /longer than 1 ms/,
      );
      expect(errors.map((e) => e.message)).toContain('analysis took longer than 1 ms');
    } finally {
      await pool.close();
    }
  });

  it('hands the worker a copy of the body view: the request keeps its bytes for the destination', async () => {
    const pool = new ProposalPool({ ...compiled, threads: 1, setup: settings, onWorkerError: () => {} });
    try {
      const text = JSON.stringify({ amount: 9, note: pad });
      const backing = new Uint8Array(text.length + 4096);
      backing.set(new TextEncoder().encode(text), 2048);
      // A Uint8Array view, and a Buffer (whose `.slice()` is a view, not a copy).
      for (const body of [backing.subarray(2048, 2048 + text.length), Buffer.from(text)]) {
        const request = req({ body });
        const out = await pool.propose(request, []);
        expect(plain(out)).toEqual(plain(propose(ctx, request)));
        expect(request.body.byteLength).toBe(text.length);
        expect(new TextDecoder().decode(request.body)).toBe(text);
      }
    } finally {
      await pool.close();
    }
  });

  it('refuses new jobs once closed', async () => {
    const pool = new ProposalPool({ ...compiled, threads: 1, setup: settings, onWorkerError: () => {} });
    await pool.close();
    await expect(pool.propose(req({ text: '{}' }), [])).rejects.toBeInstanceOf(AnalysisFailed);
  });
});
