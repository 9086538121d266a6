/**
 * The dispatch deadline and the reservation's lease (docs/design.md §2, §4.1): a reservation's
 * pending_ttl starts inside the store's transaction, so whatever the decide took (a row lock wait,
 * the other calls of a group-commit batch, its queue) is lease the call no longer has. The gate
 * counts the deadline (90 % of pending_ttl) from when it asked for the decision, so the call ends
 * before the reservation could expire and be taken over by another run; and when the decide took
 * the whole deadline, nothing is sent. PostgreSQL only: the test holds every chain head row from a
 * second connection, which makes the decide wait at its event append (PGlite is one connection).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { delay, reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

const policies = parsePolicyFiles([
  {
    file: 'lease.yaml',
    text: `
version: 1
tools:
  - id: t.slower
    match: { hosts: [127.0.0.1], method: POST, path: "/slower" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, pending_ttl: 3s, wait: 0s }
  - id: t.quick
    match: { hosts: [127.0.0.1], method: POST, path: "/quick" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, pending_ttl: 1s, wait: 0s }
`,
  },
]);

const target = storeTargets().find((t) => t.kind === 'postgres');

describe.skipIf(target === undefined)(
  `the dispatch deadline counts from the decide's ask (postgres${target === undefined ? ': skipped, needs a second connection to hold a lock' : ''})`,
  () => {
    let store: TestStore;
    let upstream: Upstream;
    let client: UpstreamClient;
    let gate: Gate;

    beforeAll(async () => {
      store = await openTestStore(target!);
      upstream = await startUpstream((req, res, raw) =>
        req.url === '/slower'
          ? delay(6_000, reply(201, { id: 3 }))(req, res, raw)
          : reply(201, { id: 1 })(req, res, raw),
      );
      client = createUpstreamClient();
      gate = await createGate({ policies, store, scope: { tenant: 'acme', area: 'support', agent: 'bot' } });
    });
    afterAll(async () => {
      await gate?.close();
      await client?.close();
      await upstream?.close();
      await store?.close();
    });

    const post = (path: string, name: string): GateRequest => ({
      scheme: 'http',
      method: 'POST',
      host: '127.0.0.1',
      port: upstream.port,
      path,
      query: '',
      headers: { 'content-type': 'application/json' },
      body: new TextEncoder().encode(JSON.stringify({ name })),
      context: {
        run: `r-${name}`,
        step: null,
        operation: null,
        worker: null,
        agentVersion: null,
        retryReason: null,
      },
    });

    /** Runs `body` while another session holds every chain head row (as commits in flight would). */
    async function holdingChainHeads<T>(body: (side: pg.Client) => Promise<T>): Promise<T> {
      const side = new pg.Client({ connectionString: store.url });
      await side.connect();
      try {
        await side.query('begin');
        await side.query('select 1 from chain_head for update');
        return await body(side);
      } finally {
        await side.query('rollback').catch(() => undefined);
        await side.end();
      }
    }

    it('a decide that waited leaves its call less time: it still ends before its reservation could expire', async () => {
      // The decide waits 1.5 s; pending_ttl 3 s. Counted from the answer, the deadline (2.7 s)
      // kept the call at the destination until 4.2 s, 1.2 s past the lease; from the ask, 2.7 s.
      const res = await holdingChainHeads(async (side) => {
        const t0 = performance.now();
        const answer = gate.handle(post('/slower', 'after-wait'), client.send);
        await new Promise((r) => setTimeout(r, 1_500));
        await side.query('rollback');
        const r = await answer;
        expect(performance.now() - t0).toBeLessThan(3_500);
        return r;
      });
      expect(res.status).toBe(504);
      const body = JSON.parse(new TextDecoder().decode(res.body)) as Record<string, unknown>;
      expect(body).toMatchObject({ verdict: 'allow', operation_state: 'unknown' });
      const rows = await store.query<{ ended_in_time: boolean }>(
        `select a.finished_at <= k.expires_at as ended_in_time
         from attempts a join operations o on o.id = a.operation_id join dedupe_keys k on k.key_hash = o.key_hash
         where a.id = '${String(body['attempt_id'])}'`,
      );
      expect(rows).toEqual([{ ended_in_time: true }]);
    });

    it('a decide that took the whole deadline sends nothing: not_sent (504, safe to try again), and the retry goes out once', async () => {
      const before = upstream.requests.filter((r) => r.url === '/quick').length;
      const res = await holdingChainHeads(async (side) => {
        const answer = gate.handle(post('/quick', 'lease-spent'), client.send);
        // pending_ttl 1 s: waiting 1.2 s spends the 0.9 s deadline before the decide returns.
        await new Promise((r) => setTimeout(r, 1_200));
        await side.query('rollback');
        return answer;
      });
      expect(res.status).toBe(504);
      expect(JSON.parse(new TextDecoder().decode(res.body))).toMatchObject({
        verdict: 'allow',
        dispatch_state: 'not_sent',
        operation_state: 'failed',
      });
      expect(upstream.requests.filter((r) => r.url === '/quick').length).toBe(before);
      // Nothing went out, and the trail says so: the same call again is a retry that goes out once.
      const again = await gate.handle(post('/quick', 'lease-spent'), client.send);
      expect(again.status).toBe(201);
      expect(upstream.requests.filter((r) => r.url === '/quick').length).toBe(before + 1);
    });
  },
);
