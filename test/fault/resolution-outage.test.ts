/**
 * An operator's resolution cut at the worst moment: `resolve --as failed` commits and
 * its reply is lost, through a TCP relay in front of PostgreSQL. The operator sees a store error
 * and resolves again; the store answers that the operation is already failed, so it landed once.
 * The agent's next proposal is then the operation's second attempt, with the same
 * Idempotency-Key, and the destination's own ledger holds exactly one effect, as the trail says.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ObservationInput, Store } from '../../src/store/index.js';
import { openKyselyStore } from '../../src/store/open-store.js';
import { verifyStoreChain } from '../../src/store/store-events.js';
import { storeTargets, type TestStore } from '../helpers/store.js';
import {
  AgentClient,
  honors,
  type InProcessGate,
  openFaultStore,
  startInProcessGate,
} from './fault-harness.js';
import { type LedgerDestination, startLedgerDestination } from './ledger-destination.js';
import { startTcpRelay, type TcpRelay } from './tcp-relay.js';

const target = storeTargets().find((t) => t.kind === 'postgres');

describe.skipIf(target === undefined)(
  `an operator's resolution whose reply is lost (postgres${target === undefined ? ': skipped, needs the PostgreSQL relay' : ''})`,
  { timeout: 60_000 },
  () => {
    let dest: LedgerDestination | undefined;
    let store: TestStore | undefined;
    let gate: InProcessGate | undefined;
    let agent: AgentClient | undefined;
    let relay: TcpRelay | undefined;
    let relayed: Store | undefined;

    afterEach(async () => {
      await agent?.close();
      await gate?.close().catch(() => undefined);
      await relayed?.close();
      await relay?.close();
      await store?.close();
      await dest?.close();
    });

    it('lands once: the second resolve is refused as already failed, the retry is attempt 2, one effect at the destination', async () => {
      dest = await startLedgerDestination({ honors });
      store = await openFaultStore(target!);
      gate = await startInProcessGate({ store, instanceId: 'fault-resolution' });
      agent = new AgentClient(gate.proxyUrl);
      dest.plan('res-1', { behaviour: 'drop-before-commit' });

      const first = await agent.propose(dest.url, 'held', 'res-1', 'run-a');
      expect(first.status).toBe(502);
      const op = first.operationId!;
      expect((await store.getOperation(op))?.state).toBe('unknown');
      expect(dest.ledger()).toEqual([]);

      relay = await startTcpRelay();
      relayed = await openKyselyStore({ url: relay.url(store.url), migrate: false });
      const resolution: ObservationInput = {
        operationId: op,
        kind: 'operator_decision',
        by: 'alice@acme.test',
        reason: 'nothing at the destination',
        settles: 'failed',
        status: null,
        destinationRef: null,
        refs: [],
        payloadFingerprint: null,
        source: 'cli',
      };
      const trapped = relay.trigger({ pattern: 'eg_add_observation(', when: 'after-reply', action: 'down' });
      const lost = relayed.addObservation(resolution);
      await trapped;
      await expect(lost).rejects.toMatchObject({ code: 'EG_ERR_STORE_UNAVAILABLE' });
      relay.up();
      // The operator tries again: it had landed, and the store says so instead of resolving twice.
      await expect(relayed.addObservation(resolution)).rejects.toMatchObject({
        code: 'EG_ERR_OPERATION_STATE',
        message: expect.stringMatching(/is failed/),
      });

      const retry = await agent.propose(dest.url, 'held', 'res-1', 'run-b');
      expect(retry.status).toBe(201);
      expect(retry.operationId).toBe(op);
      const repeat = await agent.propose(dest.url, 'held', 'res-1', 'run-c');
      expect(repeat.status).toBe(409);
      expect(repeat.verdict).toBe('duplicate');

      // The destination's own count against the trail.
      const effects = dest.ledger().filter((e) => !e.replayed);
      expect(effects.map((e) => e.idempotencyKey)).toEqual([op]);
      const trail = await store.getOperation(op);
      expect(trail?.state).toBe('succeeded');
      expect(trail?.attempts.map((a) => [a.number, a.dispatchState])).toEqual([
        [1, 'sent_no_response'],
        [2, 'response_received'],
      ]);
      const decisions = (await store.listObservations(op)).filter((o) => o.kind === 'operator_decision');
      expect(decisions).toHaveLength(1);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true });
    });
  },
);
