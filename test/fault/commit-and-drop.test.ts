/**
 * The destination performs the effect and drops the connection without answering
 * (docs/design.md §3 "Unknown is dangerous"): the gate cannot know whether the effect happened, so
 * the attempt is `sent_no_response` and the operation `unknown`, and the next proposal of the key
 * follows the tool's unknown-outcome rule: never a second effect.
 */
import { afterEach, describe, it } from 'vitest';
import { storeTargets, type TestStore } from '../helpers/store.js';
import {
  AgentClient,
  CaseRecorder,
  COLLECTIONS,
  honors,
  type InProcessGate,
  openFaultStore,
  startInProcessGate,
} from './fault-harness.js';
import { type LedgerDestination, startLedgerDestination } from './ledger-destination.js';

for (const target of storeTargets()) {
  describe(`the destination commits and drops (${target.name})`, () => {
    let dest: LedgerDestination | undefined;
    let store: TestStore | undefined;
    let gate: InProcessGate | undefined;
    let agent: AgentClient | undefined;

    afterEach(async () => {
      await agent?.close();
      await gate?.close().catch(() => undefined);
      await store?.close();
      await dest?.close();
    });

    it('attempt sent_no_response, operation unknown; the next proposal is never a second effect', async () => {
      const rec = new CaseRecorder('commit-and-drop', target.kind);
      dest = await startLedgerDestination({ honors });
      store = await openFaultStore(target);
      gate = await startInProcessGate({ store, instanceId: 'fault-commit-and-drop' });
      agent = new AgentClient(gate.proxyUrl);
      for (const c of COLLECTIONS) dest.plan(`cd-${c}`, { behaviour: 'commit-and-drop' });

      const first = await Promise.all(
        COLLECTIONS.map((c) => agent!.propose(dest!.url, c, `cd-${c}`, 'run-a').then((a) => rec.answered(a))),
      );
      for (const [i, a] of first.entries()) {
        const c = COLLECTIONS[i]!;
        rec.check(
          a.status === 502 && a.json['operation_state'] === 'unknown',
          `${c}: a dropped connection answered ${a.status} ${String(a.json['operation_state'])}, not 502 unknown`,
        );
        const op = a.operationId === null ? null : await store.getOperation(a.operationId);
        rec.check(op?.state === 'unknown', `${c}: the operation is ${op?.state}, not unknown`);
        rec.check(
          op?.attempts[0]?.dispatchState === 'sent_no_response',
          `${c}: the attempt is ${op?.attempts[0]?.dispatchState}, not sent_no_response`,
        );
      }

      const lookups = dest.lookups();
      const next = await Promise.all(
        COLLECTIONS.map((c) => agent!.propose(dest!.url, c, `cd-${c}`, 'run-b').then((a) => rec.answered(a))),
      );
      const [held, honored, reconciled] = next;
      rec.check(held!.status === 428, `held: the next proposal got ${held!.status}, not 428 hold`);
      rec.check(
        honored!.status === 201,
        `honored: the next proposal got ${honored!.status}, not 201 (a replay)`,
      );
      const honoredPosts = dest.arrivals().filter((a) => a.order === 'cd-honored');
      rec.check(
        honoredPosts.length === 2 && honoredPosts[0]!.idempotencyKey === honoredPosts[1]!.idempotencyKey,
        `honored: the retry carried Idempotency-Key ${honoredPosts.map((a) => a.idempotencyKey).join(', ')}`,
      );
      rec.check(dest.lookups() > lookups, 'reconciled: the gate did not look the effect up before deciding');
      rec.check(
        reconciled!.status === 409 && reconciled!.verdict === 'duplicate',
        `reconciled: the next proposal got ${reconciled!.status} ${reconciled!.verdict ?? ''}, not 409 duplicate`,
      );
      const report = await gate.close();
      rec.check(report.unwrittenOutcomes === 0, `${report.unwrittenOutcomes} outcome(s) unwritten at close`);
      await rec.finish({ dest, store, proposedKeys: COLLECTIONS.length, strictUnknown: true });
    });
  });
}
