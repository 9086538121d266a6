import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DedupeKeyInput } from '../../../src/store/index.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { block, expectVerdict, newKey, newRun, outcome, reserve, scope } from './inputs.js';

/**
 * The loop breaker (migration 0009): counted per run AND key, so a run halts when
 * it keeps proposing the same done effect, never because it met several distinct done effects; a
 * halted run stays halted for every proposal until an operator releases it, and the release is
 * recorded and in the verified trail.
 */
for (const target of storeTargets()) {
  describe(`loop breaker on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    /** A key whose effect is done (confirmed by another run). */
    async function doneKey(): Promise<{ key: DedupeKeyInput; operationId: string }> {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      return { key, operationId: first.operationId };
    }

    it('halts a run on the proposal after max_duplicate_skips of the SAME key, and only then', async () => {
      const k = await doneKey();
      const other = await doneKey();
      const run = newRun();
      const max = { maxDuplicateSkips: 2 };
      const skips: number[] = [];
      for (let i = 0; i < 2; i++) {
        const dup = await store.decide(reserve(run, k.key, max));
        expectVerdict(dup, 'duplicate');
        skips.push(dup.duplicateSkips);
      }
      expect(skips).toEqual([1, 2]);
      // Two skips of k already: another done key is its own first skip, and a new effect is allowed.
      const elsewhere = await store.decide(reserve(run, other.key, max));
      expectVerdict(elsewhere, 'duplicate');
      expect(elsewhere.duplicateSkips).toBe(1);
      expectVerdict(await store.decide(reserve(run, newKey(), max)), 'allow');

      // k a third time: the run halts, on this very proposal.
      const halted = await store.decide(reserve(run, k.key, max));
      expectVerdict(halted, 'halted');
      expect(halted).toMatchObject({
        runId: run,
        duplicateSkips: 2,
        haltDecisionId: halted.decisionId,
        operationId: k.operationId,
      });
      const trigger = await store.getDecision(halted.decisionId);
      expect(trigger).toMatchObject({ verdict: 'halted', operationId: k.operationId });
      expect(trigger?.reason).toMatch(
        /^loop_breaker: run .* proposed again an effect it was told 2 times is done/,
      );

      // From now on every proposal of the run is halted: a new effect, no key, a block.
      for (const next of [
        reserve(run, newKey(), max),
        reserve(run, null, max),
        block(run, 'missing key path', max),
      ]) {
        const answer = await store.decide(next);
        expectVerdict(answer, 'halted');
        expect(answer).toMatchObject({
          haltDecisionId: halted.decisionId,
          haltedAt: halted.haltedAt,
          operationId: null,
        });
        expect((await store.getDecision(answer.decisionId))?.reason).toMatch(/^run_halted: /);
      }
      // Another run is not halted by this one's loop.
      expectVerdict(await store.decide(reserve(newRun(), k.key, max)), 'duplicate');

      const [record] = await store.listRuns({ runId: run });
      expect(record).toMatchObject({
        id: run,
        scope,
        duplicateSkips: 3,
        haltedAt: halted.haltedAt,
        haltDecisionId: halted.decisionId,
        releases: [],
      });
      expect(record?.keys).toEqual([
        { keyHash: k.key.hash, skips: 2 },
        { keyHash: other.key.hash, skips: 1 },
      ]);
      expect((await store.listRuns({ halted: true, limit: 1000 })).map((r) => r.id)).toContain(run);
    });

    it('never adds distinct duplicates up: a run replaying ten done effects once each is not halted', async () => {
      const done = await Promise.all(Array.from({ length: 10 }, () => doneKey()));
      const run = newRun();
      for (const d of done)
        expectVerdict(await store.decide(reserve(run, d.key, { maxDuplicateSkips: 3 })), 'duplicate');
      expectVerdict(await store.decide(reserve(run, newKey(), { maxDuplicateSkips: 3 })), 'allow');
      const [record] = await store.listRuns({ runId: run });
      expect(record).toMatchObject({ duplicateSkips: 10, haltedAt: null });
    });

    it('a loop through several done effects still halts, within max + 1 rounds', async () => {
      const done = await Promise.all(Array.from({ length: 3 }, () => doneKey()));
      const run = newRun();
      const verdicts: string[] = [];
      for (let round = 0; round < 4; round++) {
        for (const d of done)
          verdicts.push((await store.decide(reserve(run, d.key, { maxDuplicateSkips: 3 }))).verdict);
      }
      expect(verdicts.slice(0, 9)).toEqual(Array(9).fill('duplicate'));
      expect(verdicts.slice(9)).toEqual(['halted', 'halted', 'halted']);
    });

    it('a release lets the run go on, counts start again, and it is recorded and verified', async () => {
      const k = await doneKey();
      const run = newRun();
      const max = { maxDuplicateSkips: 1 };
      expectVerdict(await store.decide(reserve(run, k.key, max)), 'duplicate');
      const halted = await store.decide(reserve(run, k.key, max));
      expectVerdict(halted, 'halted');

      const released = await store.releaseRun({
        runId: run,
        scope: null,
        by: 'oncall@acme',
        reason: 'looked: prompt fixed',
      });
      expect(released).toMatchObject({
        id: run,
        haltedAt: null,
        haltDecisionId: null,
        keys: [],
        duplicateSkips: 1,
      });
      expect(released.releases).toHaveLength(1);
      expect(released.releases[0]).toMatchObject({
        haltDecisionId: halted.decisionId,
        haltedAt: halted.haltedAt,
        releasedBy: 'oncall@acme',
        reason: 'looked: prompt fixed',
      });

      // Decided as usual again: the same done effect is a duplicate counted from one, a new one allowed.
      const again = await store.decide(reserve(run, k.key, max));
      expectVerdict(again, 'duplicate');
      expect(again.duplicateSkips).toBe(1);
      expectVerdict(await store.decide(reserve(run, newKey(), max)), 'allow');
      // And it halts again when it loops again; the first halt stays in the trail.
      const second = await store.decide(reserve(run, k.key, max));
      expectVerdict(second, 'halted');
      expect(second.haltDecisionId).not.toBe(halted.decisionId);
      expect((await store.getDecision(halted.decisionId))?.verdict).toBe('halted');

      const report = await verifyStoreChain(store);
      expect(report.ok, JSON.stringify(report.firstBad)).toBe(true);
      const events = await store.query<{ type: string; payload: string }>(
        `select type, payload::text as payload from events where type = 'run.released' and payload::text like '%${run}%'`,
      );
      expect(events).toHaveLength(1);
      expect(JSON.parse(events[0]!.payload)).toMatchObject({
        input: {
          runId: run,
          by: 'oncall@acme',
          reason: 'looked: prompt fixed',
          releaseId: released.releases[0]!.id,
        },
        facts: { runId: run, scope, haltDecisionId: halted.decisionId },
      });
    });

    it('a derived run never halts: its skips are counted, each repeat is answered duplicate, and no other run is refused', async () => {
      const k = await doneKey();
      const derived = newRun();
      const client = { derivedClient: 'host-a 10.0.0.7', maxDuplicateSkips: 1 };
      for (let i = 0; i < 4; i++)
        expectVerdict(await store.decide(reserve(derived, k.key, client)), 'duplicate');
      // Another process behind the same address (the same derived run) with a new effect.
      expectVerdict(await store.decide(reserve(derived, newKey(), client)), 'allow');
      const [run] = await store.listRuns({ runId: derived });
      expect(run).toMatchObject({ duplicateSkips: 4, haltedAt: null });
      // The same loop under a named run halts it.
      const named = newRun();
      expectVerdict(await store.decide(reserve(named, k.key, { maxDuplicateSkips: 1 })), 'duplicate');
      expectVerdict(await store.decide(reserve(named, k.key, { maxDuplicateSkips: 1 })), 'halted');
    });

    it('a repeat of the last counted call (the agent’s own idempotency key) is recorded, not counted: ten at most', async () => {
      const k = await doneKey();
      const run = newRun();
      const call = (agentKey: string) => ({
        maxDuplicateSkips: 1,
        idempotency: { maxLength: null, retentionMs: null, agentKeyMode: 'keep' as const, agentKey },
      });
      const skips = async (agentKey: string): Promise<unknown> => {
        const r = await store.decide(reserve(run, k.key, call(agentKey)));
        return r.verdict === 'duplicate' ? r.duplicateSkips : r.verdict;
      };
      // One call, its library resending it ten times: one skip, and max 1 does not halt on a repeat.
      const answers: unknown[] = [];
      for (let i = 0; i < 11; i++) answers.push(await skips('sdk-call-1'));
      expect(answers).toEqual(Array(11).fill(1));
      // The eleventh repeat is counted: the bound, so a fixed key of the agent's own still halts.
      expect(await skips('sdk-call-1')).toBe('halted');
      const [record] = await store.listRuns({ runId: run });
      expect(record!.keys).toMatchObject([{ skips: 1 }]);
      expect(await store.decide(reserve(run, newKey(), call('sdk-call-2')))).toMatchObject({
        verdict: 'halted',
      });
      expect(await store.countDuplicates([k.operationId])).toEqual({ [k.operationId]: 11 });
    });

    it('a new call (another agent key) is counted at once', async () => {
      const k = await doneKey();
      const run = newRun();
      const call = (agentKey: string) => ({
        maxDuplicateSkips: 2,
        idempotency: { maxLength: null, retentionMs: null, agentKeyMode: 'keep' as const, agentKey },
      });
      const verdicts: string[] = [];
      for (const key of ['c1', 'c2', 'c3'])
        verdicts.push((await store.decide(reserve(run, k.key, call(key)))).verdict);
      expect(verdicts).toEqual(['duplicate', 'duplicate', 'halted']);
    });

    it('counts the skips of one operation: past the window the key is a new effect, counted from one', async () => {
      const key = newKey({ windowMs: 400 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      const run = newRun();
      const max = { maxDuplicateSkips: 2 };
      for (let i = 0; i < 2; i++) expectVerdict(await store.decide(reserve(run, key, max)), 'duplicate');
      await new Promise((r) => setTimeout(r, 600));
      // Told twice that the first operation is done; its window is over: a new operation, allowed.
      const again = await store.decide(reserve(run, key, max));
      expectVerdict(again, 'allow');
      expect(again.operationId).not.toBe(first.operationId);
      await store.recordOutcome(outcome(again, key, 'succeeded'));
      const dup = await store.decide(reserve(run, key, max));
      expectVerdict(dup, 'duplicate');
      expect(dup.duplicateSkips).toBe(1);
    });

    it('refuses a release of a run that is not halted, or unknown, or ambiguous across scopes', async () => {
      const k = await doneKey();
      const run = newRun();
      expectVerdict(await store.decide(reserve(run, k.key)), 'duplicate');
      await expect(store.releaseRun({ runId: run, scope: null, by: 'a', reason: 'b' })).rejects.toMatchObject(
        {
          code: 'EG_ERR_RUN_STATE',
        },
      );
      await expect(
        store.releaseRun({ runId: newRun(), scope: null, by: 'a', reason: 'b' }),
      ).rejects.toMatchObject({
        code: 'EG_ERR_NOT_FOUND',
      });

      // One run id halted in two scopes (two tenants' agents both sent Effectgate-Run: nightly).
      const shared = newRun();
      const otherScope = { ...scope, tenant: 'globex' };
      for (const s of [scope, otherScope]) {
        const key = newKey();
        const first = await store.decide(reserve(newRun(), key, { scope: s }));
        expectVerdict(first, 'allow');
        await store.recordOutcome(outcome(first, key, 'succeeded'));
        expectVerdict(
          await store.decide(reserve(shared, key, { scope: s, maxDuplicateSkips: 1 })),
          'duplicate',
        );
        expectVerdict(await store.decide(reserve(shared, key, { scope: s, maxDuplicateSkips: 1 })), 'halted');
      }
      await expect(
        store.releaseRun({ runId: shared, scope: null, by: 'a', reason: 'b' }),
      ).rejects.toMatchObject({
        code: 'EG_ERR_CONFIG_INVALID',
        message: expect.stringContaining('2 scopes'),
      });
      const released = await store.releaseRun({ runId: shared, scope: otherScope, by: 'a', reason: 'b' });
      expect(released).toMatchObject({ scope: otherScope, haltedAt: null });
      // The other scope's run stays halted.
      const still = await store.listRuns({ runId: shared });
      expect(still.find((r) => r.scope.tenant === scope.tenant)?.haltedAt).not.toBeNull();
      expectVerdict(await store.decide(reserve(shared, newKey(), { maxDuplicateSkips: 1 })), 'halted');
      expectVerdict(
        await store.decide(reserve(shared, newKey(), { scope: otherScope, maxDuplicateSkips: 1 })),
        'allow',
      );
    });
  });
}
