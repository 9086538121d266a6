import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHECKSUM_SETTING } from '../../../src/store/functions/index.js';
import type { DecideResult, DedupeKeyInput } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, request, reserve, unknownOperation } from './inputs.js';

/**
 * An approval is for that very request (migration 0011, eg_unknown.sql): a card holds the
 * fingerprint of the request a person was asked about, and only a proposal with that fingerprint
 * may use it. The same key values with another body (another payee) is another request: held on
 * its own card, which says it changed, never let go under an approval of the other one.
 */

const changed = { ...request, fingerprint: 'sha256:payee-mallory' };

type Hold = Extract<DecideResult, { verdict: 'hold' }>;

async function hold(store: TestStore, key: DedupeKeyInput, req = request): Promise<Hold> {
  const held = await store.decide(reserve(newRun(), key, { request: req }));
  expectVerdict(held, 'hold');
  return held;
}

async function approve(store: TestStore, approvalId: string): Promise<void> {
  await store.decideApproval({ approvalId, action: 'approve', by: 'alice@acme.test', reason: 'checked' });
}

async function holdFacts(store: TestStore, decisionId: string): Promise<Record<string, unknown>> {
  const rows = await store.query<{ payload: string }>(
    `select payload from events where type = 'decision.hold'
      and (payload::jsonb -> 'input' ->> 'decisionId') = '${decisionId}'`,
  );
  expect(rows).toHaveLength(1);
  return JSON.parse(rows[0]!.payload).facts;
}

for (const target of storeTargets()) {
  describe(`approvals bind to the request fingerprint on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    it('an approval of the lost request does not let a changed one go: held on its own card; the approved one goes once', async () => {
      const key = newKey();
      const first = await unknownOperation(store, key);
      const held = await hold(store, key);
      await approve(store, held.approvalId);

      const other = await hold(store, key, changed);
      expect(other.approvalId).not.toBe(held.approvalId);
      expect(other).toMatchObject({
        operationId: first.operationId,
        requestChanged: true,
        approvedRequest: { id: held.approvalId, fingerprint: request.fingerprint },
      });
      expect(await holdFacts(store, other.decisionId)).toMatchObject({
        requestChanged: true,
        fingerprint: changed.fingerprint,
        previousAttempt: { id: first.attemptId, fingerprint: request.fingerprint },
        approvedRequest: { id: held.approvalId, fingerprint: request.fingerprint },
        approval: { id: other.approvalId, created: true },
      });
      const card = await store.getApproval(other.approvalId);
      expect(card).toMatchObject({
        state: 'requested',
        intent: { fingerprint: request.fingerprint, requestFingerprint: changed.fingerprint },
      });
      expect(card?.plannedRecovery).toContain('CHANGED');
      expect(card?.plannedRecovery).toContain(changed.fingerprint);
      expect(card?.plannedRecovery).toContain(request.fingerprint);
      expect(await store.getApproval(held.approvalId)).toMatchObject({ state: 'approved' });

      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      expect(retry).toMatchObject({
        operationId: first.operationId,
        attemptNumber: 2,
        retryDecision: 'operator_approved',
      });
      expect(await store.getApproval(held.approvalId)).toMatchObject({
        state: 'used',
        usedByAttemptId: retry.attemptId,
      });
      await store.recordOutcome(outcome(retry, key, 'succeeded'));
      const op = await store.getOperation(first.operationId);
      expect(op?.attempts.map((a) => a.request.fingerprint)).toEqual([
        request.fingerprint,
        request.fingerprint,
      ]);
      // The change's card asked about a retry of an operation that is now settled.
      expect(await store.getApproval(other.approvalId)).toMatchObject({ state: 'withdrawn' });
    });

    it('an approval of a changed request does not let the original go: it is held; the change forks once', async () => {
      const key = newKey();
      const first = await unknownOperation(store, key);
      const asked = await hold(store, key, changed);
      expect(asked.requestChanged).toBe(true);
      await approve(store, asked.approvalId);

      const original = await hold(store, key);
      expect(original.approvalId).not.toBe(asked.approvalId);
      expect(original).toMatchObject({
        requestChanged: false,
        approvedRequest: { id: asked.approvalId, fingerprint: changed.fingerprint },
      });
      expect(await store.getApproval(original.approvalId)).toMatchObject({
        intent: { fingerprint: request.fingerprint, requestFingerprint: request.fingerprint },
      });
      expect(await store.getOperation(first.operationId)).toMatchObject({ state: 'unknown' });

      const fork = await store.decide(reserve(newRun(), key, { request: changed }));
      expectVerdict(fork, 'allow');
      expect(fork).toMatchObject({ attemptNumber: 1, supersedesOperationId: first.operationId });
      expect(await store.getApproval(asked.approvalId)).toMatchObject({
        state: 'used',
        usedByAttemptId: fork.attemptId,
      });
      expect((await store.getOperation(first.operationId))?.attempts).toHaveLength(1);
    });

    it("once a retry of the attempt went, another request's card is withdrawn: the next hold asks about the new attempt", async () => {
      const key = newKey();
      const first = await unknownOperation(store, key);
      const held = await hold(store, key);
      const other = await hold(store, key, changed);
      await approve(store, held.approvalId);
      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      expect(await store.getApproval(other.approvalId)).toMatchObject({ state: 'withdrawn' });
      await store.recordOutcome(outcome(retry, key, 'unknown'));

      const again = await hold(store, key, changed);
      expect(again.approvalId).not.toBe(other.approvalId);
      expect(again).toMatchObject({ previousAttemptId: retry.attemptId, requestChanged: true });
      await approve(store, again.approvalId);
      const fork = await store.decide(reserve(newRun(), key, { request: changed }));
      expectVerdict(fork, 'allow');
      expect(fork).toMatchObject({ attemptNumber: 1, supersedesOperationId: first.operationId });
    });

    it('concurrent holds of two requests after one lost attempt: one card per request', async () => {
      const key = newKey();
      const first = await unknownOperation(store, key);
      const held = await Promise.all(
        Array.from({ length: 10 }, (_, i) => hold(store, key, i % 2 === 0 ? request : changed)),
      );
      const byRequest = new Map<boolean, Set<string>>([
        [false, new Set()],
        [true, new Set()],
      ]);
      for (const h of held) byRequest.get(h.requestChanged)?.add(h.approvalId);
      expect(byRequest.get(false)?.size).toBe(1);
      expect(byRequest.get(true)?.size).toBe(1);
      const cards = await store.listApprovals({ operationId: first.operationId, state: 'requested' });
      expect(cards.map((c) => c.intent.requestFingerprint).sort()).toEqual(
        [changed.fingerprint, request.fingerprint].sort(),
      );
      // Exactly one hold per request says it opened that request's card.
      const facts = await Promise.all(held.map((h) => holdFacts(store, h.decisionId)));
      expect(facts.filter((f) => (f['approval'] as { created: boolean }).created)).toHaveLength(2);
    });

    it('migration 0011 gives recorded cards the lost request, and withdraws an open one a change asked for', async () => {
      const scratch = await openTestStore(target);
      try {
        const keys = [newKey(), newKey(), newKey(), newKey()] as const;
        for (const key of keys) await unknownOperation(scratch, key);
        const same = await hold(scratch, keys[0]);
        const changedOpen = await hold(scratch, keys[1], changed);
        const sameApproved = await hold(scratch, keys[2]);
        const changedApproved = await hold(scratch, keys[3], changed);
        await approve(scratch, sameApproved.approvalId);
        await approve(scratch, changedApproved.approvalId);
        // As a store before 0011 looks: no request_fingerprint, one open card per operation, and
        // a card a change asked for says so only in its words.
        await scratch.rawQuery(`update approvals set planned_recovery = 'One more attempt. The proposal that asked for this approval CHANGED the request (another fingerprint): approving lets the changed request go.'
          where id in ('${changedOpen.approvalId}', '${changedApproved.approvalId}')`);
        await scratch.rawQuery('drop index approvals_one_open_idx');
        await scratch.rawQuery('alter table approvals drop column request_fingerprint');
        await scratch.rawQuery(
          `create unique index approvals_one_open_idx on approvals (operation_id) where state = 'requested'`,
        );
        await scratch.rawQuery(`delete from kysely_migration where name = '0011-approval-fingerprints'`);
        // Nor the migrations after it, which run again: 0012, 0013 and 0014 add columns (dropped here),
        // 0015 redefines two checks (it runs again as it is), 0017 indexes a column of 0013 (the
        // index goes with the dropped column), 0018 makes the checkpoints table and 0019 the
        // projection's (both dropped here), 0020 adds a column only if it is missing. A later one must be undone here too when it cannot run
        // twice.
        await scratch.rawQuery('alter table attempts drop column outcome_rule, drop column error_code');
        await scratch.rawQuery(
          'alter table attempts drop column idempotency_key, drop column agent_idempotency_key, drop column gate_idempotency_key',
        );
        await scratch.rawQuery(
          'alter table run_key_skips drop column call_key, drop column call_at, drop column call_repeats',
        );
        await scratch.rawQuery('drop table audit_checkpoints');
        await scratch.rawQuery('drop function eg_audit_checkpoints_append_only');
        await scratch.rawQuery(`delete from settings where name = 'audit_log_id'`);
        await scratch.rawQuery('drop table event_projection');
        await scratch.rawQuery(`delete from kysely_migration where name > '0011-approval-fingerprints'`);
        // Functions made anew on the old schema's successor, not cached plans of the dropped column.
        await scratch.rawQuery(`delete from settings where name = '${CHECKSUM_SETTING}'`);

        await scratch.migrate();

        expect(await scratch.getApproval(same.approvalId)).toMatchObject({
          state: 'requested',
          intent: { requestFingerprint: request.fingerprint },
        });
        expect(await scratch.getApproval(changedOpen.approvalId)).toMatchObject({
          state: 'withdrawn',
          intent: { requestFingerprint: null },
        });
        expect(await scratch.getApproval(sameApproved.approvalId)).toMatchObject({
          state: 'approved',
          intent: { requestFingerprint: request.fingerprint },
        });
        expect(await scratch.getApproval(changedApproved.approvalId)).toMatchObject({
          state: 'approved',
          intent: { requestFingerprint: null },
        });

        // The approved same request still goes; the change whose request was never recorded goes
        // under nothing: it is held on a new card that names it.
        const retry = await scratch.decide(reserve(newRun(), keys[2]));
        expectVerdict(retry, 'allow');
        expect(retry.retryDecision).toBe('operator_approved');
        const again = await hold(scratch, keys[3], changed);
        expect(again.approvalId).not.toBe(changedApproved.approvalId);
        expect(await scratch.getApproval(again.approvalId)).toMatchObject({
          state: 'requested',
          intent: { requestFingerprint: changed.fingerprint },
        });
        const reopened = await hold(scratch, keys[1], changed);
        expect(reopened.approvalId).not.toBe(changedOpen.approvalId);
      } finally {
        await scratch.close();
      }
    });
  });
}
