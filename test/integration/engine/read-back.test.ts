/**
 * Agent read-backs where they could settle the wrong thing (found by a hostile
 * review, each failing before its fix). In process: createGate over a real store, with a scripted
 * destination (an UpstreamSender) so each race and each answer is exact: an answer that predates
 * a later attempt, a lookup-shaped GET to another host, polls that would each cost a store write,
 * another scheme, a store that is down, and encoded slashes across segment boundaries.
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import type {
  GateRequest,
  UpstreamRequest,
  UpstreamResult,
  UpstreamSender,
} from '../../../src/engine/types.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';

const text = readFileSync(new URL('../../fixtures/unknown-policies/tools.yaml', import.meta.url), 'utf8');
const policies = parsePolicyFiles([{ file: 'tools.yaml', text }]);
const scope = { tenant: 'acme', area: 'support', agent: 'bot' };
const enc = new TextEncoder();
const PORT = 4555;

function req(over: Partial<GateRequest> & { json?: unknown }): GateRequest {
  const { json, ...rest } = over;
  return {
    scheme: 'http',
    method: 'GET',
    host: '127.0.0.1',
    port: PORT,
    path: '/',
    query: '',
    headers: json === undefined ? {} : { 'content-type': 'application/json' },
    body: json === undefined ? new Uint8Array(0) : enc.encode(JSON.stringify(json)),
    context: { run: 'r1', step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
    ...rest,
  };
}

const ok = (json: unknown): UpstreamResult => ({
  kind: 'response',
  status: 200,
  headers: { 'content-type': 'application/json' },
  body: enc.encode(JSON.stringify(json)),
});
const lost: UpstreamResult = {
  kind: 'failure',
  dispatchState: 'sent_no_response',
  timedOut: false,
  error: 'ECONNRESET',
};

const target = storeTargets().at(-1)!;

describe(`agent read-backs in process (${target.name})`, { timeout: 30_000 }, () => {
  let store: TestStore;
  let gate: Gate;
  beforeAll(async () => {
    store = await openTestStore(target);
    gate = await createGate({ policies, store, scope });
  });
  afterAll(async () => {
    await gate?.close();
    await store?.close();
  });

  async function unknownOp(
    repo: string,
    title: string,
    send: UpstreamSender = async () => lost,
  ): Promise<string> {
    const res = await gate.handle(
      req({ method: 'POST', path: `/repos/acme/${repo}/issues`, json: { title } }),
      send,
    );
    expect(res.status).toBe(502);
    return res.headers['effectgate-operation'] as string;
  }

  it('an answer sent before a later attempt settles nothing: it cannot see a second copy that attempt made', async () => {
    const repo = 'toctou';
    const title = 'Rotate the key';
    const issues: { title: string; html_url: string }[] = [];
    const create = async (): Promise<UpstreamResult> => {
      issues.push({ title, html_url: `https://t/${repo}/${issues.length + 1}` });
      return lost; // created, response lost
    };
    const op = await unknownOp(repo, title, create); // attempt 1: issue #1 exists
    // The agent's own listing goes out now; its answer (a snapshot: #1 only) is slow to arrive.
    let answerReadBack!: (r: UpstreamResult) => void;
    const readBack = gate.handle(
      req({ path: `/repos/acme/${repo}/issues`, query: 'state=all' }),
      () => new Promise((resolve) => (answerReadBack = resolve)),
    );
    await sleep(20);
    const snapshot = ok([...issues]);
    // Meanwhile the agent retries: the gate's own lookup sees a lagging list (none) and holds;
    // an operator approves that retry (the list showed nothing), it goes out, creates #2, and its
    // response is lost too.
    const send2 = async (u: UpstreamRequest): Promise<UpstreamResult> =>
      u.method === 'GET' ? ok([]) : create();
    const held = await gate.handle(
      req({ method: 'POST', path: `/repos/acme/${repo}/issues`, json: { title } }),
      send2,
    );
    expect(held.status).toBe(428);
    const approval = (JSON.parse(new TextDecoder().decode(held.body)) as { approval_id: string }).approval_id;
    await store.decideApproval({
      approvalId: approval,
      action: 'approve',
      by: 'ops',
      reason: 'list shows none',
    });
    const retry = await gate.handle(
      req({ method: 'POST', path: `/repos/acme/${repo}/issues`, json: { title } }),
      send2,
    );
    expect(retry.status).toBe(502);
    expect(issues).toHaveLength(2);
    expect((await store.getOperation(op))!.state).toBe('unknown');
    // The old snapshot arrives.
    answerReadBack(snapshot);
    await readBack;
    await sleep(300);
    const record = await store.getOperation(op);
    // Two issues exist: "succeeded" is a lie (the attempt-2 effect is hidden, its key confirmed).
    expect(record!.state).not.toBe('succeeded');
  });

  it('only the lookup itself, to a host the tool names, is buffered: any other host or query streams as before', async () => {
    const head = req({
      host: 'gitlab.example.org',
      port: 443,
      scheme: 'https',
      path: '/repos/x/y/issues',
      query: 'page=2',
    });
    // The tools name their host by address (127.0.0.1, every port): another name is looked up once
    // before it is classified (it could be that address), then streams as before.
    await gate.prepare('gitlab.example.org', 443);
    expect(gate.route(head)).toEqual({ kind: 'pass' });
  });

  it('twenty identical polls are judged once: one observation, at most two store writes', async () => {
    const op = await unknownOp('poll', 'Polled');
    let calls = 0;
    const orig = store.addObservation.bind(store);
    (store as { addObservation: typeof store.addObservation }).addObservation = (i) => {
      calls++;
      return orig(i);
    };
    try {
      const t0 = store.stats.roundTrips;
      for (let i = 0; i < 20; i++) {
        await gate.handle(req({ path: '/repos/acme/poll/issues', query: 'state=all' }), async () =>
          ok([{ title: 'someone else', html_url: 'u' }]),
        );
      }
      await sleep(300);
      const trips = store.stats.roundTrips - t0;
      const obs = (await store.listObservations(op)).filter((o) => o.kind === 'read_back');
      expect(obs).toHaveLength(1); // recorded once...
      // ...but the same answer 20 times costs 20 locking write round trips (plus the list).
      expect({ calls, trips }).toEqual({ calls: expect.any(Number), trips: expect.any(Number) });
      expect(calls).toBeLessThanOrEqual(2);
    } finally {
      (store as { addObservation: typeof store.addObservation }).addObservation = orig;
    }
  });

  it('a read-back over https says nothing of an operation whose attempts went over plain http', async () => {
    const op = await unknownOp('scheme', 'Over http');
    await sleep(1100); // past the candidates cache
    await gate.handle(
      req({ scheme: 'https', path: '/repos/acme/scheme/issues', query: 'state=all' }),
      async () => ok([{ title: 'Over http', html_url: 'https://evil/1' }]),
    );
    await sleep(300);
    expect((await store.getOperation(op))!.state).toBe('unknown');
  });

  it('with the store down, read-backs do not ask it on every GET (a failed read is remembered like a good one)', async () => {
    let lists = 0;
    const orig = store.listOperations.bind(store);
    (store as { listOperations: typeof store.listOperations }).listOperations = async () => {
      lists++;
      throw new Error('store down');
    };
    await sleep(1100); // past the candidates cache
    try {
      for (let i = 0; i < 20; i++) {
        const res = await gate.handle(
          req({ path: '/repos/acme/down/issues', query: 'state=all' }),
          async () => ok([]),
        );
        expect(res.status).toBe(200);
      }
      await sleep(100);
      expect(lists).toBeLessThanOrEqual(2);
    } finally {
      (store as { listOperations: typeof store.listOperations }).listOperations = orig;
    }
  });

  it('an encoded slash stays inside its segment: /repos/acme/a%2Fb says nothing of /repos/acme%2Fa/b', async () => {
    await sleep(1100);
    const post = await gate.handle(
      req({ method: 'POST', path: '/repos/acme%2Fa/b/issues', json: { title: 'Boundary' } }),
      async () => lost,
    );
    expect(post.status).toBe(502);
    const op = post.headers['effectgate-operation'] as string;
    expect((await store.getOperation(op))!.keyValues).toEqual(['acme/a', 'b', 'Boundary']);
    await sleep(1100);
    // Another resource: owner "acme", repo "a/b".
    const got = await gate.handle(req({ path: '/repos/acme/a%2Fb/issues', query: 'state=all' }), async () =>
      ok([{ title: 'Boundary', html_url: 'https://t/acme/a%2Fb/1' }]),
    );
    expect(got.status).toBe(200);
    await sleep(300);
    expect((await store.getOperation(op))!.state).toBe('unknown');
  });
});
