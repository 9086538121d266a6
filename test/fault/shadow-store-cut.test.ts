/**
 * Shadow mode under a store fault (from a hostile review): the connection lost exactly at
 * eg_shadow_dispatched. The request was sent and the destination did the effect; after the store
 * is back and the gate stops cleanly, the trail must show what came back (the shadow dispatch
 * waits in the outbox, as an allow's outcome does), or the trail lies about an effect that
 * happened.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../src/engine/index.js';
import { parsePolicyFiles } from '../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../src/proxy/index.js';
import { effectPost, headerOf } from '../helpers/ledger-requests.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { type LedgerDestination, startLedgerDestination } from './ledger-destination.js';
import { startTcpRelay, type TcpRelay } from './tcp-relay.js';

const policies = parsePolicyFiles([
  {
    file: 'p.yaml',
    text: `
version: 1
tools:
  - id: ticket.create
    match: { hosts: [127.0.0.1], method: POST, path: "/tickets/effects" }
    effect: create
    dedupe: { key: [$.body.order], window: 1h, wait: 0s }
`,
  },
]);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

for (const target of storeTargets()) {
  describe.skipIf(target.kind !== 'postgres')(
    `review: store lost at eg_shadow_dispatched (${target.name}${target.kind === 'postgres' ? '' : ': needs a TCP connection to cut'})`,
    () => {
      let store: TestStore;
      let dest: LedgerDestination;
      let client: UpstreamClient;
      let relay: TcpRelay;
      let gate: Gate;

      beforeAll(async () => {
        store = await openTestStore(target);
        dest = await startLedgerDestination();
        client = createUpstreamClient();
        relay = await startTcpRelay();
        gate = await createGate({
          policies,
          store: relay.url(store.url),
          scope: { tenant: 'acme', area: 'ops', agent: 'cut-bot' },
          mode: 'shadow',
          instanceId: 'review-cut',
          analysisThreads: 0,
        });
      });

      afterAll(async () => {
        relay?.up();
        await gate?.close().catch(() => undefined);
        await client?.close();
        await relay?.close();
        await dest?.close();
        await store?.close();
      });

      it('a shadow dispatch whose record hit a store outage is recorded once the store is back, before a clean stop ends', async () => {
        expect((await gate.handle(effectPost(dest, 'tickets', 'o-cut', 'run-cut'), client.send)).status).toBe(
          201,
        );
        dest.plan('o-cut', { behaviour: 'hold' });
        const answer = gate.handle(effectPost(dest, 'tickets', 'o-cut', 'run-cut'), client.send);
        await dest.arrival('o-cut'); // the allow's, already answered
        const arrived = await dest.arrival('o-cut');
        const trapped = relay.trigger({
          pattern: 'eg_shadow_dispatched',
          when: 'before-forward',
          action: 'down',
        });
        arrived.release();
        await trapped;
        const res = await answer;
        expect(res.status).toBe(201);
        expect(headerOf(res, 'effectgate-verdict')).toBe('would_duplicate');
        await sleep(500);
        relay.up();
        // The store is back for a while before the clean stop: time enough for any retry.
        await sleep(2_000);
        const report = await gate.close();
        expect(report.abandonedCalls).toBe(0);
        // Ground truth: two effects at the destination.
        expect(dest.ledger().filter((e) => e.order === 'o-cut')).toHaveLength(2);
        const decisions = await store.listDecisions({ runId: 'run-cut' });
        expect(decisions.map((d) => [d.verdict, d.shadowDispatch?.status ?? null])).toEqual([
          ['allow', null],
          ['would_duplicate', 201],
        ]);
      });
    },
  );
}
