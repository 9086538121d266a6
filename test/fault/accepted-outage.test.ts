/**
 * Accepted work under a store cut. A destination answered `202 Accepted`, and the outcome's write
 * never reached the store (the relay in front of PostgreSQL went down as it was sent): the agent
 * still gets its 202, the outcome is written once the store is back, and it is written as
 * `accepted` — the key stays reserved, so a repeat is `pending` and the job service's own ledger
 * holds one job. A lost write must never leave the key free (a second job) nor confirmed (a job
 * that may still fail recorded as done).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../src/engine/index.js';
import { parsePolicyFiles } from '../../src/policy/index.js';
import { gateInterceptor } from '../../src/undici/index.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { startUpstream, type Upstream } from '../helpers/upstream.js';
import { poll } from './fault-harness.js';
import { STATEMENT, startTcpRelay, type TcpRelay } from './tcp-relay.js';

const POLICY = `
version: 1
tools:
  - id: jobs.start_export
    match: { hosts: [127.0.0.1], method: POST, path: /exports }
    effect: create
    dedupe: { key: [$.body.name], window: 1h }
    outcome:
      accepted: [202]
`;

for (const target of storeTargets()) {
  describe.skipIf(target.kind !== 'postgres')(
    `accepted work under a store cut (${target.name}${target.kind === 'postgres' ? '' : ': skipped, the cut is a TCP relay in front of PostgreSQL'})`,
    () => {
      let store: TestStore;
      let relay: TcpRelay;
      let gate: Gate;
      let upstream: Upstream;
      let agent: Agent;
      const ledger: string[] = [];

      afterEach(async () => {
        relay?.up();
        await agent?.close();
        await gate?.close().catch(() => undefined);
        await relay?.close();
        await upstream?.close();
        await store?.close();
      });

      it('the 202 outcome cut on its way to the store: the agent gets its 202, the operation is accepted once the store is back, a repeat is pending, one job', async () => {
        store = await openTestStore(target);
        relay = await startTcpRelay();
        gate = await createGate({
          policies: parsePolicyFiles([{ file: 'jobs.yaml', text: POLICY }]),
          store: relay.url(store.url),
          scope: { tenant: 'acme', area: 'data', agent: 'exporter' },
          instanceId: 'fault-accepted-cut',
          drainTimeoutMs: 8_000,
        });
        upstream = await startUpstream((req, res) => {
          const { name } = JSON.parse(req.body.toString('utf8')) as { name: string };
          ledger.push(name);
          const body = JSON.stringify({ id: ledger.length, status: 'queued' });
          res.writeHead(202, {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            location: `/exports/${ledger.length}`,
          });
          res.end(body);
        });
        agent = new Agent();
        const start = async (run: string) => {
          const res = await request(`${upstream.url}/exports`, {
            dispatcher: agent.compose(gateInterceptor(gate, { run })),
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ name: 'q4-report' }),
          });
          await res.body.dump();
          return { status: res.statusCode, verdict: res.headers['effectgate-verdict'] };
        };

        const cut = relay.trigger({
          pattern: STATEMENT.recordOutcome,
          when: 'before-forward',
          action: 'down',
        });
        const first = start('run-1');
        await cut;
        expect(await first).toEqual({ status: 202, verdict: 'allow' });
        await sleep(1_000);
        relay.up();

        const settled = await poll(async () => {
          const [op] = await store.listOperations({});
          return op?.state === 'accepted' ? op : undefined;
        }, 15_000);
        expect(settled?.attempts.map((a) => [a.status, a.destinationRef])).toEqual([[202, '/exports/1']]);

        expect(await start('run-2')).toEqual({ status: 409, verdict: 'pending' });
        expect(ledger).toEqual(['q4-report']);
        const ops = await store.listOperations({});
        expect(ops.map((o) => [o.state, o.attempts.length])).toEqual([['accepted', 1]]);
      });
    },
  );
}
