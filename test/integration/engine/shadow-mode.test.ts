/**
 * Shadow mode: every verdict is computed and recorded, as `would_<verdict>` for
 * all but allow, and nothing is refused or answered by the gate. What this must never do is lie:
 * the destination's own ledger (the ground truth) is compared with the trail after each case, so a
 * request sent anyway that the trail does not show, or an effect shown that did not happen, fails.
 * And it must leave nothing behind that changes enforce mode later except the history itself: no
 * halted run, no approval card; a tool moved to enforce recognises the effects made in shadow.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { verifyStoreChain } from '../../../src/store/index.js';
import type { DecisionRecord } from '../../../src/store/types.js';
import { type LedgerDestination, startLedgerDestination } from '../../fault/ledger-destination.js';
import { effectPost, headerOf } from '../../helpers/ledger-requests.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';

const policyText = (mode: string): string => `
version: 1
loop_breaker: { max_duplicate_skips: 2 }
tools:
  - id: pay.charge
    match: { hosts: [127.0.0.1], method: POST, path: "/charges/effects" }
    effect: financial
    dedupe: { key: [$.body.order], window: 1h, pending_ttl: 5s, wait: 2s }
    idempotency: { header: Idempotency-Key }
    ${mode}
  - id: ticket.create
    match: { hosts: [127.0.0.1], method: POST, path: "/tickets/effects" }
    effect: create
    dedupe: { key: [$.body.order], window: 1h, wait: 0s }
    idempotency: { header: Idempotency-Key }
  - id: refund.create
    match: { hosts: [127.0.0.1], method: POST, path: "/refunds/effects" }
    effect: financial
    dedupe: { key: [$.body.refund_of], window: 1h, on_missing: block }
    ${mode}
`;

const scope = { tenant: 'acme', area: 'billing', agent: 'shadow-bot' };

for (const target of storeTargets()) {
  describe(`shadow mode (${target.name})`, () => {
    let store: TestStore;
    let dest: LedgerDestination;
    let client: UpstreamClient;
    const gates: Gate[] = [];
    const gate = async (
      mode: 'enforce' | 'shadow',
      toolMode = '',
      instanceId = 'shadow-host',
    ): Promise<Gate> => {
      const g = await createGate({
        policies: parsePolicyFiles([{ file: 'shadow.yaml', text: policyText(toolMode) }]),
        store,
        scope,
        mode,
        instanceId: `${instanceId}-${gates.length}`,
        analysisThreads: 0,
      });
      gates.push(g);
      return g;
    };
    /** The decisions of a run, as the store has them (with their shadow dispatches). */
    const decisionsOf = (run: string): Promise<DecisionRecord[]> => store.listDecisions({ runId: run });
    const effectsOf = (order: string): number =>
      dest.ledger().filter((e) => e.order === order && !e.replayed).length;

    beforeAll(async () => {
      store = await openTestStore(target);
      // `charges` honours Idempotency-Key, as Stripe does: an injected key would make it replay.
      dest = await startLedgerDestination({ honors: (c) => c === 'charges' });
      client = createUpstreamClient();
    });

    afterAll(async () => {
      for (const g of gates) await g.close();
      await client?.close();
      await dest?.close();
      await store?.close();
    });

    it('a duplicate is recorded as would_duplicate and sent anyway, as written; the trail shows both effects', async () => {
      const g = await gate('shadow');
      const first = await g.handle(effectPost(dest, 'charges', 'o-dup', 'run-dup'), client.send);
      const second = await g.handle(effectPost(dest, 'charges', 'o-dup', 'run-dup'), client.send);
      // The agent reads the destination's own answers both times, never a 409.
      expect([first.status, second.status]).toEqual([201, 201]);
      expect(headerOf(first, 'effectgate-verdict')).toBe('allow');
      expect(headerOf(first, 'effectgate-mode')).toBe('shadow');
      expect(headerOf(second, 'effectgate-verdict')).toBe('would_duplicate');
      expect(headerOf(second, 'effectgate-operation')).toBe(headerOf(first, 'effectgate-operation'));
      expect(headerOf(second, 'effectgate-warning')).toBeUndefined();
      // No Idempotency-Key injected: the destination did the effect twice, as it would without a gate.
      expect(
        dest
          .ledger()
          .filter((e) => e.order === 'o-dup')
          .map((e) => e.idempotencyKey),
      ).toEqual([null, null]);
      expect(effectsOf('o-dup')).toBe(2);

      const decisions = await decisionsOf('run-dup');
      expect(decisions.map((d) => d.verdict)).toEqual(['allow', 'would_duplicate']);
      const operation = await store.getOperation(decisions[0]!.operationId!);
      expect(operation?.state).toBe('succeeded');
      expect(operation?.idempotencyHeader ?? null).toBeNull();
      // Ledger == trail: the allow's attempt, and the would_duplicate's dispatch, both 201.
      expect(operation?.attempts.map((a) => [a.dispatchState, a.status])).toEqual([
        ['response_received', 201],
      ]);
      expect(decisions[1]!.operationId).toBe(operation?.id);
      expect(decisions[1]!.shadowDispatch).toMatchObject({ dispatchState: 'response_received', status: 201 });
      expect(decisions[0]!.shadowDispatch).toBeNull();
      // The event log holds both, hash-chained: the decision in its own chain (it changed no
      // operation), what came back in the operation's.
      const events = await store.readEvents(0, 10_000);
      const decided = events.find(
        (e) => e.type.startsWith('decision.') && e.payload.includes(`"decisionId":"${decisions[1]!.id}"`),
      );
      expect(decided?.type).toBe('decision.would_duplicate');
      const dispatched = events.filter(
        (e) => e.type === 'shadow.dispatched' && e.operationId === operation!.id,
      );
      expect(dispatched).toHaveLength(1);
      expect(JSON.parse(dispatched[0]!.payload).input).toMatchObject({
        status: 201,
        verdict: 'would_duplicate',
      });
      expect((await verifyStoreChain(store)).ok).toBe(true);
    });

    it('a looping run is never halted in shadow: would_halted is recorded and every request still goes out', async () => {
      const g = await gate('shadow');
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++)
        statuses.push(
          (await g.handle(effectPost(dest, 'tickets', 'o-loop', 'run-loop'), client.send)).status,
        );
      expect(statuses).toEqual([201, 201, 201, 201, 201]);
      expect(effectsOf('o-loop')).toBe(5);
      const verdicts = (await decisionsOf('run-loop')).map((d) => d.verdict);
      // max_duplicate_skips 2: two skips, then the loop breaker would halt the run, every time.
      expect(verdicts).toEqual([
        'allow',
        'would_duplicate',
        'would_duplicate',
        'would_halted',
        'would_halted',
      ]);
      const runs = await store.listRuns({ halted: true });
      expect(runs.map((r) => r.id)).not.toContain('run-loop');
      // Every would_* decision's request is in the trail with what came back: 4 dispatches + 1 attempt = 5 effects.
      const dispatched = (await decisionsOf('run-loop')).filter((d) => d.shadowDispatch?.status === 201);
      expect(dispatched).toHaveLength(4);
    });

    it('an unknown outcome is would_hold: sent anyway, and no approval card asks about a retry that already happened', async () => {
      const g = await gate('shadow');
      dest.plan('o-unknown', { behaviour: 'commit-and-drop' });
      const lost = await g.handle(effectPost(dest, 'tickets', 'o-unknown', 'run-unknown'), client.send);
      expect(lost.status).toBe(502);
      const retry = await g.handle(effectPost(dest, 'tickets', 'o-unknown', 'run-unknown'), client.send);
      expect(retry.status).toBe(201);
      expect(headerOf(retry, 'effectgate-verdict')).toBe('would_hold');
      expect(effectsOf('o-unknown')).toBe(2);
      const decisions = await decisionsOf('run-unknown');
      expect(decisions.map((d) => d.verdict)).toEqual(['allow', 'would_hold']);
      const opId = decisions[0]!.operationId!;
      expect((await store.getOperation(opId))?.state).toBe('unknown');
      expect(await store.listApprovals({ operationId: opId })).toEqual([]);
      expect(decisions[1]!.shadowDispatch).toMatchObject({ status: 201 });
    });

    it('a concurrent proposal is would_pending and is not held back to wait on the reservation', async () => {
      const g = await gate('shadow');
      dest.plan('o-pending', { behaviour: 'hold' });
      const first = g.handle(effectPost(dest, 'charges', 'o-pending', 'run-pending'), client.send);
      const arrived = await dest.arrival('o-pending');
      const startedAt = performance.now();
      const second = await g.handle(effectPost(dest, 'charges', 'o-pending', 'run-pending'), client.send);
      // The tool waits up to 2 s in enforce mode; shadow sends at once (the first is still held).
      expect(performance.now() - startedAt).toBeLessThan(1_500);
      expect(second.status).toBe(201);
      expect(headerOf(second, 'effectgate-verdict')).toBe('would_pending');
      arrived.release();
      expect((await first).status).toBe(201);
      expect(effectsOf('o-pending')).toBe(2);
      expect((await decisionsOf('run-pending')).map((d) => d.verdict).sort()).toEqual([
        'allow',
        'would_pending',
      ]);
    });

    it('a tool in shadow keeps its history when it moves to enforce: the effect made in shadow is a duplicate now', async () => {
      const shadowTool = await gate('enforce', 'mode: shadow');
      await shadowTool.handle(effectPost(dest, 'charges', 'o-move', 'run-move-1'), client.send);
      expect(
        headerOf(
          await shadowTool.handle(effectPost(dest, 'charges', 'o-move', 'run-move-1'), client.send),
          'effectgate-verdict',
        ),
      ).toBe('would_duplicate');
      await shadowTool.close();
      const enforcing = await gate('enforce');
      const res = await enforcing.handle(effectPost(dest, 'charges', 'o-move', 'run-move-2'), client.send);
      expect(res.status).toBe(409);
      expect(headerOf(res, 'effectgate-verdict')).toBe('duplicate');
      // Nothing more was sent: the two effects of the shadow period, no third.
      expect(effectsOf('o-move')).toBe(2);
    });

    it("a reload that drops a tool's mode: shadow enforces from the next request on", async () => {
      const g = await gate('enforce', 'mode: shadow');
      await g.handle(effectPost(dest, 'charges', 'o-reload', 'run-reload'), client.send);
      const shadowed = await g.handle(effectPost(dest, 'charges', 'o-reload', 'run-reload'), client.send);
      expect(headerOf(shadowed, 'effectgate-verdict')).toBe('would_duplicate');
      await g.reload(parsePolicyFiles([{ file: 'shadow.yaml', text: policyText('') }]));
      const enforced = await g.handle(effectPost(dest, 'charges', 'o-reload', 'run-reload'), client.send);
      expect(enforced.status).toBe(409);
      expect(effectsOf('o-reload')).toBe(2);
    });

    it('per tool: a shadow tool beside an enforced one in an enforcing gate', async () => {
      const g = await gate('enforce', 'mode: shadow');
      await g.handle(effectPost(dest, 'tickets', 'o-mixed', 'run-mixed'), client.send);
      const enforced = await g.handle(effectPost(dest, 'tickets', 'o-mixed', 'run-mixed'), client.send);
      expect(enforced.status).toBe(409);
      expect(effectsOf('o-mixed')).toBe(1);
      await g.handle(effectPost(dest, 'charges', 'o-mixed', 'run-mixed'), client.send);
      const shadowed = await g.handle(effectPost(dest, 'charges', 'o-mixed', 'run-mixed'), client.send);
      expect(shadowed.status).toBe(201);
      expect(headerOf(shadowed, 'effectgate-verdict')).toBe('would_duplicate');
    });

    it('a policy block is would_block: the request the key could not be built for still goes out', async () => {
      const g = await gate('shadow');
      const res = await g.handle(effectPost(dest, 'refunds', 'o-block', 'run-block'), client.send);
      expect(res.status).toBe(201);
      expect(headerOf(res, 'effectgate-verdict')).toBe('would_block');
      expect(effectsOf('o-block')).toBe(1);
      const [decision] = await decisionsOf('run-block');
      expect(decision?.verdict).toBe('would_block');
      expect(decision?.reason).toMatch(/^key_path_missing/);
      expect(decision?.shadowDispatch).toMatchObject({ dispatchState: 'response_received', status: 201 });
    });

    it('counts what enforce mode would have prevented, per tool and verdict', async () => {
      const counts = await store.countShadowVerdicts();
      const of = (tool: string, verdict: string): number =>
        counts.find((c) => c.toolId === tool && c.verdict === verdict)?.count ?? 0;
      // o-dup, o-move, o-reload and o-mixed: 1 each of pay.charge; o-loop's 2 of ticket.create.
      expect(of('pay.charge', 'would_duplicate')).toBe(4);
      expect(of('ticket.create', 'would_duplicate')).toBe(2);
      expect(of('ticket.create', 'would_halted')).toBe(2);
      expect(of('ticket.create', 'would_hold')).toBe(1);
      expect(of('pay.charge', 'would_pending')).toBe(1);
      // The enforced 409 of o-mixed is not a shadow verdict.
      expect(counts.every((c) => c.verdict.startsWith('would_'))).toBe(true);
    });

    it('a request sent anyway is recorded before the agent gets its answer; close() waits for it', async () => {
      const g = await gate('shadow');
      await g.handle(effectPost(dest, 'tickets', 'o-stop', 'run-stop'), client.send);
      dest.plan('o-stop', { behaviour: 'ok', delayMs: 300 });
      const inFlight = g.handle(effectPost(dest, 'tickets', 'o-stop', 'run-stop'), client.send);
      await dest.arrival('o-stop');
      await dest.arrival('o-stop');
      const report = await g.close();
      expect(report.abandonedCalls).toBe(0);
      expect((await inFlight).status).toBe(201);
      const decisions = await decisionsOf('run-stop');
      expect(decisions.map((d) => [d.verdict, d.shadowDispatch?.status ?? null])).toEqual([
        ['allow', null],
        ['would_duplicate', 201],
      ]);
    });
  });
}
