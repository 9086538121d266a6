/**
 * The store lost at each moment of one governed call (docs/design.md §4.1): before
 * decide, while decide's answer is on the wire, while the call is at the destination, and at
 * recordOutcome (never written, or written with the answer lost); and as a group-commit batch's
 * answer is on the wire (six agents at once, so their decides, then their outcomes,
 * share one eg_batch round trip): the batch committed and the gate never learns it, so every
 * call in it is where a lone call whose answer was lost is; and the same for a batch that carries
 * the outcomes of some calls and the proposals of others. The gate reaches PostgreSQL through a
 * TCP relay the test cuts; the checker reads the database directly.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, it } from 'vitest';
import { POSTGRES_GROUP_COMMIT } from '../../src/store/group-commit.js';
import { storeTargets, type TestStore } from '../helpers/store.js';
import { faultCase } from './fault-cases.js';
import {
  AgentClient,
  type Answer,
  CaseRecorder,
  COLLECTIONS,
  honors,
  type InProcessGate,
  openFaultStore,
  outcomeRecorded,
  PENDING_TTL_MS,
  poll,
  startInProcessGate,
} from './fault-harness.js';
import { type LedgerDestination, startLedgerDestination } from './ledger-destination.js';
import { STATEMENT, startTcpRelay, type TcpRelay } from './tcp-relay.js';

/** How long a test waits for the gate to write a held-back outcome once the store is back. */
const RECORD_WITHIN_MS = 4_000;

/** A group-commit lane's round trips in flight, and the batch cases' agents: that many and two. */
const LANE = POSTGRES_GROUP_COMMIT.maxInFlight;
const CALLS = Array.from({ length: LANE + 2 }, (_, i) => ({
  collection: COLLECTIONS[i % COLLECTIONS.length]!,
  i,
}));

for (const target of storeTargets()) {
  describe.skipIf(target.kind !== 'postgres')(
    `store outages at each moment of a call (${target.name}${target.kind === 'postgres' ? '' : `: skipped, ${faultCase('down-before-decide').notOn}`})`,
    () => {
      let dest: LedgerDestination;
      let store: TestStore;
      let relay: TcpRelay;
      let gate: InProcessGate;
      let agent: AgentClient;

      /**
       * Per case: a fresh destination and database, a relay in front of the database, and a gate
       * that owns its store through the relay.
       */
      async function setUp(instanceId: string): Promise<void> {
        dest = await startLedgerDestination({ honors });
        store = await openFaultStore(target);
        relay = await startTcpRelay();
        gate = await startInProcessGate({ store: relay.url(store.url), instanceId });
        agent = new AgentClient(gate.proxyUrl);
      }

      /** Each call answered 201 and reached the destination once, or 503 and never reached it. */
      function expectSentOnlyWhenAllowed(
        rec: CaseRecorder,
        calls: readonly { a: Answer; order: string }[],
      ): void {
        for (const { a, order } of calls) {
          const arrived = dest.arrivals().filter((x) => x.order === order).length;
          rec.check(a.status === 201 || a.status === 503, `${order}: answered ${a.status}, not 201 or 503`);
          rec.check(
            a.status === 201 ? arrived === 1 : arrived === 0,
            `${order}: answered ${a.status} and reached the destination ${arrived} time(s)`,
          );
        }
      }

      /** Each agent got the destination's 201, and its attempt's outcome is recorded once the store is back. */
      async function expectOutcomesRecorded(
        rec: CaseRecorder,
        calls: readonly { a: Answer; order: string }[],
      ): Promise<void> {
        for (const { a, order } of calls) {
          rec.check(a.status === 201, `${order}: the agent got ${a.status}, not the destination's 201`);
          const recorded =
            a.operationId === null
              ? undefined
              : await outcomeRecorded(store, a.operationId, RECORD_WITHIN_MS);
          rec.check(
            recorded?.length === 1,
            `${order}: ${recorded?.length ?? 0} attempt(s) with an outcome 4 s after the store came back, not 1`,
          );
        }
      }

      /** The next proposal of each of these keys (another run) is 409 duplicate. */
      async function expectNextIsDuplicate(rec: CaseRecorder, prefix: string): Promise<void> {
        const again = await Promise.all(
          CALLS.map(({ collection, i }) =>
            agent.propose(dest.url, collection, `${prefix}-${i}`, 'run-b').then((a) => rec.answered(a)),
          ),
        );
        for (const [n, a] of again.entries()) {
          rec.check(
            a.status === 409 && a.verdict === 'duplicate',
            `${prefix}-${CALLS[n]!.i}: the next proposal got ${a.status} ${a.verdict ?? ''}, not 409 duplicate`,
          );
        }
      }

      /** A graceful stop leaves no outcome unwritten. */
      async function closeGate(rec: CaseRecorder): Promise<void> {
        const report = await gate.close();
        rec.check(
          report.unwrittenOutcomes === 0,
          `${report.unwrittenOutcomes} outcome(s) unwritten at close`,
        );
      }

      afterEach(async () => {
        relay?.up();
        await agent?.close();
        await gate?.close().catch(() => undefined);
        await relay?.close();
        await store?.close();
        await dest?.close();
      });

      it('store down before decide: 503, nothing sent; once it is back the key is performed once', async () => {
        await setUp('fault-down-before-decide');
        const rec = new CaseRecorder('down-before-decide', 'postgres');
        relay.down();
        const first = await Promise.all(
          COLLECTIONS.map((c) =>
            agent.propose(dest.url, c, `dbd-${c}`, 'run-a').then((a) => rec.answered(a)),
          ),
        );
        for (const [i, a] of first.entries()) {
          rec.check(
            a.status === 503,
            `${COLLECTIONS[i]}: store down at decide answered ${a.status}, not 503`,
          );
        }
        rec.check(
          dest.arrivals().length === 0,
          `${dest.arrivals().length} request(s) reached the destination`,
        );
        relay.up();
        const again = await Promise.all(
          COLLECTIONS.map((c) =>
            agent.propose(dest.url, c, `dbd-${c}`, 'run-b').then((a) => rec.answered(a)),
          ),
        );
        for (const [i, a] of again.entries()) {
          rec.check(a.status === 201, `${COLLECTIONS[i]}: with the store back answered ${a.status}, not 201`);
        }
        const report = await gate.close();
        rec.check(
          report.unwrittenOutcomes === 0,
          `${report.unwrittenOutcomes} outcome(s) unwritten at close`,
        );
        await rec.finish({ dest, store, proposedKeys: COLLECTIONS.length, strictUnknown: true });
      });

      it('decide commits but its answer is lost: 503, nothing sent, the attempt gets an outcome (the gate knows it sent nothing)', async () => {
        await setUp('fault-decide-reply-lost');
        const rec = new CaseRecorder('decide-reply-lost', 'postgres');
        const trapped = relay.trigger({ pattern: STATEMENT.decide, when: 'after-reply', action: 'down' });
        const answer = agent.propose(dest.url, 'held', 'drl-held', 'run-a');
        await trapped;
        await sleep(500);
        relay.up();
        const a = rec.answered(await answer);
        rec.check(a.status === 503, `decide answer lost: answered ${a.status}, not 503`);
        rec.check(
          dest.arrivals().length === 0,
          `${dest.arrivals().length} request(s) reached the destination`,
        );
        const report = await gate.close();
        rec.check(
          report.unwrittenOutcomes === 0,
          `${report.unwrittenOutcomes} outcome(s) unwritten at close`,
        );
        await rec.finish({ dest, store, proposedKeys: 1, strictUnknown: true });
      });

      it('store down 1.5 s while the call is at the destination: the agent gets its 201, the outcome is recorded once the store is back, the next proposal is a duplicate', async () => {
        await setUp('fault-down-at-destination');
        const rec = new CaseRecorder('down-at-destination', 'postgres');
        for (const c of COLLECTIONS) dest.plan(`dad-${c}`, { behaviour: 'hold' });
        const answers = COLLECTIONS.map((c) => agent.propose(dest.url, c, `dad-${c}`, 'run-a'));
        const arrivals = await Promise.all(COLLECTIONS.map((c) => dest.arrival(`dad-${c}`)));
        // Every call is at the destination: the store goes away, then the destination answers.
        relay.down();
        const downAt = Date.now();
        await sleep(200);
        for (const arrival of arrivals) arrival.release();
        // Past pending_ttl (counted from decide, just before the arrival) before the store returns.
        const back = sleep(Math.max(0, 1_500 - (Date.now() - downAt))).then(() => relay.up());
        const first = await Promise.all(answers);
        await back;
        for (const [i, a] of first.entries()) {
          rec.answered(a);
          rec.check(
            a.status === 201,
            `${COLLECTIONS[i]}: the agent got ${a.status}, not the destination's 201`,
          );
        }
        for (const arrival of arrivals) {
          const recorded = await outcomeRecorded(store, arrival.idempotencyKey ?? '', RECORD_WITHIN_MS);
          rec.check(
            recorded !== undefined,
            `${arrival.collection}: outcome still not recorded ${RECORD_WITHIN_MS} ms after the store came back (${PENDING_TTL_MS} ms pending_ttl long past)`,
          );
        }
        const second = await Promise.all(
          COLLECTIONS.map((c) =>
            agent.propose(dest.url, c, `dad-${c}`, 'run-b').then((a) => rec.answered(a)),
          ),
        );
        for (const [i, a] of second.entries()) {
          rec.check(
            a.status === 409 && a.verdict === 'duplicate',
            `${COLLECTIONS[i]}: the next proposal got ${a.status} ${a.verdict ?? ''}, not 409 duplicate`,
          );
        }
        const report = await gate.close();
        rec.check(
          report.unwrittenOutcomes === 0,
          `${report.unwrittenOutcomes} outcome(s) unwritten at close`,
        );
        await rec.finish({ dest, store, proposedKeys: COLLECTIONS.length, strictUnknown: true });
      });

      for (const when of ['before-forward', 'after-reply'] as const) {
        const id = when === 'before-forward' ? 'cut-at-record-outcome' : 'record-outcome-reply-lost';
        it(`${faultCase(id).fault}: the agent gets its 201, the outcome is recorded once, the next proposal is a duplicate`, async () => {
          await setUp(`fault-${id}`);
          const rec = new CaseRecorder(id, 'postgres');
          const order = `${id}-held`;
          const trapped = relay.trigger({ pattern: STATEMENT.recordOutcome, when, action: 'down' });
          const answer = agent.propose(dest.url, 'held', order, 'run-a');
          await trapped;
          const back = sleep(1_000).then(() => relay.up());
          const a = rec.answered(await answer);
          await back;
          rec.check(a.status === 201, `the agent got ${a.status}, not the destination's 201`);
          const [arrival] = dest.arrivals();
          const recorded = await outcomeRecorded(store, arrival?.idempotencyKey ?? '', RECORD_WITHIN_MS);
          rec.check(
            recorded !== undefined,
            `outcome still not recorded ${RECORD_WITHIN_MS} ms after the store came back`,
          );
          rec.check(
            recorded === undefined || recorded.length === 1,
            `the operation has ${recorded?.length} attempts, not 1`,
          );
          const next = rec.answered(await agent.propose(dest.url, 'held', order, 'run-b'));
          rec.check(
            next.status === 409 && next.verdict === 'duplicate',
            `the next proposal got ${next.status} ${next.verdict ?? ''}, not 409 duplicate`,
          );
          const report = await gate.close();
          rec.check(
            report.unwrittenOutcomes === 0,
            `${report.unwrittenOutcomes} outcome(s) unwritten at close`,
          );
          await rec.finish({ dest, store, proposedKeys: 1, strictUnknown: true });
        });
      }

      it(`${faultCase('batch-decide-reply-lost').fault}: ${faultCase('batch-decide-reply-lost').promise}`, async () => {
        await setUp('fault-batch-decide-reply-lost');
        const rec = new CaseRecorder('batch-decide-reply-lost', 'postgres');
        const trapped = relay.trigger({
          pattern: STATEMENT.decideBatch,
          when: 'after-reply',
          action: 'down',
        });
        // While the relay holds the store's replies no decide returns, so at most LANE round trips
        // are in flight and the calls behind them queue: a batch forms, whatever order they arrive
        // in. Nothing waits on a lock in the database (a held chain head would meet the hot
        // functions' 4 s lock_timeout on a loaded machine).
        const stall = relay.stallReplies(STATEMENT.decide);
        const answers = CALLS.map(({ collection, i }) =>
          agent.propose(dest.url, collection, `bdl-${i}`, 'run-a'),
        );
        const sent = await poll(async () => (stall.sent() >= 1 ? true : undefined), 8_000);
        if (sent === undefined) throw new Error('no decide reached the store');
        // Not longer: a decide that waits past its lease (pending_ttl 1 s) is not sent at all.
        await sleep(PENDING_TTL_MS * 0.3);
        stall.release();
        await trapped;
        await sleep(500);
        relay.up();
        const first: Answer[] = (await Promise.all(answers)).map((a) => rec.answered(a));
        const refused = first.filter((a) => a.status === 503).length;
        rec.check(refused >= 2, `only ${refused} call(s) refused: the cut batch had at least two`);
        expectSentOnlyWhenAllowed(
          rec,
          first.map((a, n) => ({ a, order: `bdl-${CALLS[n]!.i}` })),
        );
        await closeGate(rec);
        await rec.finish({ dest, store, proposedKeys: CALLS.length, strictUnknown: true });
      });

      it(`${faultCase('batch-outcome-reply-lost').fault}: ${faultCase('batch-outcome-reply-lost').promise}`, async () => {
        await setUp('fault-batch-outcome-reply-lost');
        const rec = new CaseRecorder('batch-outcome-reply-lost', 'postgres');
        for (const { i } of CALLS) dest.plan(`bol-${i}`, { behaviour: 'hold' });
        const answers = CALLS.map(({ collection, i }) =>
          agent.propose(dest.url, collection, `bol-${i}`, 'run-a'),
        );
        const arrivals = await Promise.all(CALLS.map(({ i }) => dest.arrival(`bol-${i}`)));
        const trapped = relay.trigger({
          pattern: STATEMENT.recordOutcomeBatch,
          when: 'after-reply',
          action: 'down',
        });
        // Every call answers at once; while the relay holds the store's replies no outcome write
        // returns, so the ones behind the LANE in flight queue: a batch forms. Nothing waits on a
        // lock in the database (a held chain head would meet the hot functions' 4 s lock_timeout
        // on a loaded machine).
        const stall = relay.stallReplies(STATEMENT.recordOutcome);
        for (const arrival of arrivals) arrival.release();
        const sent = await poll(async () => (stall.sent() >= 1 ? true : undefined), 8_000);
        if (sent === undefined) throw new Error('no outcome write reached the store');
        await sleep(300);
        stall.release();
        await trapped;
        const back = sleep(1_000).then(() => relay.up());
        const first = (await Promise.all(answers)).map((a) => rec.answered(a));
        await back;
        await expectOutcomesRecorded(
          rec,
          first.map((a, n) => ({ a, order: `bol-${CALLS[n]!.i}` })),
        );
        await expectNextIsDuplicate(rec, 'bol');
        await closeGate(rec);
        await rec.finish({ dest, store, proposedKeys: CALLS.length, strictUnknown: true });
      });

      it(`${faultCase('batch-mixed-reply-lost').fault}: ${faultCase('batch-mixed-reply-lost').promise}`, async () => {
        await setUp('fault-batch-mixed-reply-lost');
        const rec = new CaseRecorder('batch-mixed-reply-lost', 'postgres');
        // Six calls wait at the destination (their proposals are done), so their outcomes can be
        // let go at one moment; six more are proposed at that moment.
        for (const { i } of CALLS) dest.plan(`bmo-${i}`, { behaviour: 'hold' });
        const held = CALLS.map(({ collection, i }) =>
          agent.propose(dest.url, collection, `bmo-${i}`, 'run-a'),
        );
        const arrivals = await Promise.all(CALLS.map(({ i }) => dest.arrival(`bmo-${i}`)));
        const trapped = relay.trigger(
          { pattern: STATEMENT.mixedBatch, when: 'after-reply', action: 'down' },
          15_000,
        );
        // While the relay holds the store's replies no round trip returns, and nothing waits on a
        // lock in the database (a held chain head would meet the hot functions' 4 s lock_timeout on
        // a loaded machine). LANE fillers, proposed one at a time, take every round trip the lane
        // may have in flight; then the outcomes, let go at once, and six proposals made now all
        // queue, and the next round trip carries them together.
        const stall = relay.stallReplies(STATEMENT.decide);
        const fillers: Promise<Answer>[] = [];
        for (let k = 0; k < LANE; k++) {
          fillers.push(agent.propose(dest.url, COLLECTIONS[k % COLLECTIONS.length]!, `bmf-${k}`, 'run-a'));
          const sent = await poll(async () => (stall.sent() >= k + 1 ? true : undefined), 8_000);
          if (sent === undefined) throw new Error(`filler ${k} never reached the store`);
        }
        for (const arrival of arrivals) arrival.release();
        const proposed = CALLS.map(({ collection, i }) =>
          agent.propose(dest.url, collection, `bmp-${i}`, 'run-a'),
        );
        // Not longer: a proposal that waits past its lease (pending_ttl 1 s) is not sent at all.
        await sleep(PENDING_TTL_MS * 0.3);
        stall.release();
        const cut = await trapped.then(
          () => true,
          () => false,
        );
        rec.check(cut, 'no batch carried outcomes and proposals together');
        const back = sleep(1_000).then(() => relay.up());
        const outcomes = (await Promise.all(held)).map((a) => rec.answered(a));
        const proposals = (await Promise.all(proposed)).map((a) => rec.answered(a));
        const filled = (await Promise.all(fillers)).map((a) => rec.answered(a));
        await back;
        await expectOutcomesRecorded(
          rec,
          outcomes.map((a, n) => ({ a, order: `bmo-${CALLS[n]!.i}` })),
        );
        const refused = proposals.filter((a) => a.status === 503).length;
        rec.check(refused >= 1, 'no proposal refused: the cut batch carried none');
        const others = [
          ...proposals.map((a, n) => ({ a, order: `bmp-${CALLS[n]!.i}` })),
          ...filled.map((a, k) => ({ a, order: `bmf-${k}` })),
        ];
        expectSentOnlyWhenAllowed(rec, others);
        await expectNextIsDuplicate(rec, 'bmo');
        await closeGate(rec);
        await rec.finish({ dest, store, proposedKeys: 2 * CALLS.length + LANE, strictUnknown: true });
      });
    },
  );
}
