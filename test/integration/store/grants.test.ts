import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyStoreChain } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import {
  expectVerdict,
  grantInput,
  newKey,
  newRun,
  reserve,
  scope,
  sleep,
  unknownOperation,
} from './inputs.js';

/**
 * Session grants (migration 0008, eg_grant.sql, eg_unknown.sql): one run of one
 * scope may retry unknown operations of a tool for a while without a card per call; each retry's
 * card is used under the grant and names it; a revoked or expired grant, another run, another
 * scope or another tool is held as before.
 */

for (const target of storeTargets()) {
  describe(`session grants on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    it('the granted run retries each unknown operation of the tool once, each card used under the grant; another run is held', async () => {
      const batch = newRun();
      const g = await store.createGrant(grantInput(batch));
      expect(g).toMatchObject({
        runId: batch,
        toolId: 'github.create_issue',
        state: 'active',
        grantedBy: 'ops@acme.test',
      });

      const key = newKey();
      const first = await unknownOperation(store, key);
      // Another run's proposal is held: the grant is this run's alone.
      const other = await store.decide(reserve(newRun(), key));
      expectVerdict(other, 'hold');

      const retry = await store.decide(reserve(batch, key));
      expectVerdict(retry, 'allow');
      expect(retry).toMatchObject({
        operationId: first.operationId,
        attemptNumber: 2,
        retryOfAttemptId: first.attemptId,
        retryDecision: 'operator_approved',
      });
      const cards = await store.listApprovals({ operationId: first.operationId });
      expect(cards).toHaveLength(1);
      expect(cards[0]).toMatchObject({
        id: other.approvalId,
        state: 'used',
        grantId: g.id,
        decidedBy: 'ops@acme.test',
        usedByAttemptId: retry.attemptId,
      });

      // A second unknown operation: no hold came first, the card is made for the retry.
      const key2 = newKey();
      const second = await unknownOperation(store, key2);
      const retry2 = await store.decide(reserve(batch, key2));
      expectVerdict(retry2, 'allow');
      expect(retry2.operationId).toBe(second.operationId);
      expect((await store.listApprovals({ operationId: second.operationId }))[0]).toMatchObject({
        state: 'used',
        grantId: g.id,
        requestedBy: `grant:${g.id}`,
      });
      const report = await verifyStoreChain(store);
      expect(report.ok, JSON.stringify(report).slice(0, 600)).toBe(true);
    });

    it('a revoked or expired grant, another tool or another scope is held as before', async () => {
      const batch = newRun();
      const g = await store.createGrant(grantInput(batch));
      const revoked = await store.revokeGrant({ grantId: g.id, by: 'lead@acme.test', reason: 'batch done' });
      expect(revoked).toMatchObject({
        state: 'revoked',
        revokedBy: 'lead@acme.test',
        revokeReason: 'batch done',
      });
      await expect(store.revokeGrant({ grantId: g.id, by: 'x', reason: 'again' })).rejects.toMatchObject({
        code: 'EG_ERR_APPROVAL_STATE',
      });
      const key = newKey();
      await unknownOperation(store, key);
      expectVerdict(await store.decide(reserve(batch, key)), 'hold');

      const shortRun = newRun();
      await store.createGrant(grantInput(shortRun, { ttlMs: 30 }));
      await sleep(60);
      expect((await store.listGrants({ runId: shortRun }))[0]?.state).toBe('expired');
      const key2 = newKey();
      await unknownOperation(store, key2);
      expectVerdict(await store.decide(reserve(shortRun, key2)), 'hold');

      const toolRun = newRun();
      await store.createGrant(grantInput(toolRun, { toolId: 'github.close_issue' }));
      const key3 = newKey();
      await unknownOperation(store, key3);
      expectVerdict(await store.decide(reserve(toolRun, key3)), 'hold');

      const scopedRun = newRun();
      await store.createGrant(grantInput(scopedRun, { scope: { ...scope, tenant: 'globex' } }));
      const key4 = newKey();
      await unknownOperation(store, key4);
      expectVerdict(await store.decide(reserve(scopedRun, key4)), 'hold');

      // A grant for every tool (toolId null) covers this one.
      const anyRun = newRun();
      await store.createGrant(grantInput(anyRun, { toolId: null }));
      expectVerdict(await store.decide(reserve(anyRun, key4)), 'allow');
    });

    it("a grant takes its scope from the run's decisions, and refuses a run that decided nothing", async () => {
      const run = newRun();
      await expect(store.createGrant(grantInput(run, { scope: null }))).rejects.toMatchObject({
        code: 'EG_ERR_CONFIG_INVALID',
        message: expect.stringMatching(/has decided nothing yet/),
      });
      expectVerdict(await store.decide(reserve(run, newKey())), 'allow');
      const g = await store.createGrant(grantInput(run, { scope: null }));
      expect(g.scope).toEqual(scope);
      await expect(
        store.revokeGrant({ grantId: 'no-such-grant', by: 'x', reason: 'y' }),
      ).rejects.toMatchObject({
        code: 'EG_ERR_NOT_FOUND',
      });
    });

    it('never lets a retry past an exhausted budget', async () => {
      const batch = newRun();
      await store.createGrant(grantInput(batch));
      const key = newKey();
      const first = await unknownOperation(store, key, { retryBudget: 1 });
      const r = await store.decide(reserve(batch, key, { retryBudget: 1 }));
      expectVerdict(r, 'block');
      expect(r).toMatchObject({ reason: 'retry_budget_exhausted', operationId: first.operationId });
    });
  });
}
