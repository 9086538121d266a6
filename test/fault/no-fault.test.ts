/**
 * The harness's control run: the same load as the flapping case, with no fault at all. It must
 * pass on today's gate; if it does not, a fault case's failure says nothing about the gate.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { storeTargets, type TestStore } from '../helpers/store.js';
import { LONG_VARIANT } from './fault-cases.js';
import { CaseRecorder, honors, openFaultStore, runLoad, startInProcessGate } from './fault-harness.js';
import { type LedgerDestination, startLedgerDestination } from './ledger-destination.js';

const KEYS = LONG_VARIANT ? 600 : 90;

for (const target of storeTargets()) {
  describe(`no fault, ${KEYS} keys × 2–3 runs, 8 agents (${target.name})`, () => {
    let dest: LedgerDestination;
    let store: TestStore;

    beforeAll(async () => {
      dest = await startLedgerDestination({ honors });
      store = await openFaultStore(target);
    });

    afterAll(async () => {
      await dest?.close();
      await store?.close();
    });

    it('performs every key once; every attempt has an outcome; the trail agrees with the ledger', async () => {
      const rec = new CaseRecorder('no-fault', target.kind);
      // The test's own store handle: the gate borrows it and leaves it open for the checker.
      const gate = await startInProcessGate({ store, instanceId: 'fault-no-fault' });
      let closed = false;
      try {
        const load = await runLoad({
          proxyUrl: gate.proxyUrl,
          destUrl: dest.url,
          prefix: `nf-${target.kind}`,
          keys: KEYS,
          agents: 8,
          spreadMs: 0,
          maxTries: 10,
          deadlineMs: 30_000,
        });
        rec.count(load.answers);
        rec.check(
          load.unsettled === 0,
          `${load.unsettled} proposal(s) never settled (${load.unsettledExamples.join('; ')})`,
        );
        rec.check(
          (load.answers['201'] ?? 0) === KEYS,
          `${load.answers['201'] ?? 0} effects allowed, not ${KEYS}`,
        );
        const report = await gate.close();
        closed = true;
        rec.check(
          report.unwrittenOutcomes === 0,
          `${report.unwrittenOutcomes} outcome(s) unwritten at close`,
        );
        await rec.finish({ dest, store, proposedKeys: KEYS, strictUnknown: true });
      } finally {
        if (!closed) await gate.close();
      }
    }, 60_000);
  });
}
