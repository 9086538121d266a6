/**
 * Session grants where they could let a retry out that must not go (found by a
 * hostile review, each failing before its fix): a revoke that commits while a retry reads the
 * grant, a changed request, a retry a person denied, and input that reaches the store directly
 * (the PGlite store socket forwards it as given).
 */

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GrantInput } from '../../../src/store/index.js';
import { chainOf, verifyStoreChain } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import {
  expectVerdict,
  grantInput,
  newKey,
  newRun,
  request,
  reserve,
  sleep,
  unknownOperation,
} from './inputs.js';

for (const target of storeTargets()) {
  describe(`session grants under races and bad input on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('a grant to RETRY never lets a CHANGED request (a fork, a new operation) out while the original is unknown', async () => {
      const batch = newRun();
      await store.createGrant(grantInput(batch));
      const key = newKey();
      const first = await unknownOperation(store, key);
      const changed = await store.decide(
        reserve(batch, key, { request: { ...request, fingerprint: 'sha256:CHANGED-BODY' } }),
      );
      // Observed: allow of a NEW operation superseding the unknown one, decided by nobody who saw the change.
      expect(
        { verdict: changed.verdict, op: (changed as { operationId?: string }).operationId },
        'a changed request went out under a blanket retry grant',
      ).toEqual({ verdict: 'hold', op: first.operationId });
    });

    it("an operator's explicit DENY of this very retry is not overridden by the run's grant", async () => {
      const batch = newRun();
      const key = newKey();
      const first = await unknownOperation(store, key);
      const held = await store.decide(reserve(newRun(), key));
      expectVerdict(held, 'hold');
      await store.decideApproval({
        approvalId: held.approvalId,
        action: 'deny',
        by: 'lead@acme.test',
        reason: 'do NOT retry this one: the destination may have created it',
      });
      await store.createGrant(grantInput(batch));
      const retry = await store.decide(reserve(batch, key));
      const cards = await store.listApprovals({ operationId: first.operationId });
      expect(
        { verdict: retry.verdict, cards: cards.map((c) => c.state).sort() },
        'the denied retry went out anyway under the grant',
      ).toEqual({ verdict: 'hold', cards: ['denied', 'requested'] });
    });

    it.runIf(target.kind === 'postgres')(
      'no retry starts under a grant whose revoke committed first (PostgreSQL only: needs a second connection)',
      async () => {
        const batch = newRun();
        const key = newKey();
        const first = await unknownOperation(store, key);
        // The grant must be on another chain than the operation's. One that is not is revoked before
        // the next is made: left active, it would be the run's earliest grant, the one a retry reads,
        // and the race below would revoke another (a retry allowed under it failed this test once in
        // 64 runs).
        let g = await store.createGrant(grantInput(batch));
        while (chainOf(g.id) === chainOf(first.operationId)) {
          await store.revokeGrant({
            grantId: g.id,
            by: 'lead@acme.test',
            reason: 'on the operation’s chain',
          });
          g = await store.createGrant(grantInput(batch));
        }
        const sibling = await store.openSibling();
        const locker = new pg.Client({ connectionString: store.url });
        await locker.connect();
        try {
          // Ordinary contention: another writer holds the head row of the grant's chain for a moment.
          await locker.query('begin');
          await locker.query('select * from chain_head where id = $1 for update', [chainOf(g.id)]);
          // The revoke locks and updates the grant row, then waits for that chain head.
          let revokedFirst = false;
          const revoke = store
            .revokeGrant({ grantId: g.id, by: 'lead@acme.test', reason: 'stop now' })
            .then((r) => {
              revokedFirst = true;
              return r;
            });
          // Until the revoke holds the grant row and waits on the chain head: a fixed sleep let a
          // loaded machine (CI, two cores) start the retry before the revoke had locked anything.
          await lockWaiters(locker, 1);
          // The granted run proposes the retry meanwhile; it reads the grant as active.
          let decidedAfterRevoke = false;
          let retryDone = false;
          const retryP = sibling.decide(reserve(batch, key)).then((r) => {
            decidedAfterRevoke = revokedFirst;
            retryDone = true;
            return r;
          });
          // The retry waits too, on the grant row the revoke holds (or it has already returned).
          await lockWaiters(locker, 2, () => decidedAfterRevoke || retryDone);
          await locker.query('commit');
          const revoked = await revoke;
          const retry = await retryP;
          const used = (await store.listApprovals({ operationId: first.operationId })).find(
            (c) => c.grantId === g.id,
          );
          const events = await store.query<{ type: string; at: string }>(
            `select type, recorded_at::text as at from events where type in ('grant.revoked') and payload like '%${g.id}%'
             union all select type, recorded_at::text from events where operation_id = '${first.operationId}' and type = 'decision.allow' order by at`,
          );
          expect(revoked.state).toBe('revoked');
          // Observed: allow, decided after the revoke returned; card used under the grant after its revokedAt.
          const seen = {
            verdict: retry.verdict,
            decidedAfterRevoke,
            cardUsedAt: used?.usedAt,
            grantRevokedAt: revoked.revokedAt,
            trailOrder: events.map((e) => e.type),
          };
          expect(seen, `a retry went out under a revoked grant: ${JSON.stringify(seen)}`).toMatchObject({
            verdict: 'hold',
          });
        } finally {
          await locker.end().catch(() => undefined);
          await sibling.close();
        }
      },
    );

    it('bad grant input reaching the store directly (store socket) is refused, not turned into a wrong record', async () => {
      // A negative / zero ttl is accepted by the store and yields a grant that is already expired.
      const run = newRun();
      const result = await store.createGrant(grantInput(run, { ttlMs: -60_000 })).then(
        (g) => `created (${g.state})`,
        (e: { code?: string }) => `refused ${e.code}`,
      );
      expect(result).toMatch(/^refused/);
    });

    it("a grant id given through the store (store socket JSON) cannot replace the store's own, so the chain verifies", async () => {
      const store = await openTestStore(target);
      try {
        const run = newRun();
        // The store spreads the caller's input after its own grantId: { action, grantId, ...input }.
        const g = await store
          .createGrant({ ...grantInput(run), grantId: 12345 } as unknown as GrantInput)
          .then(
            (x) => x.id,
            (e: Error) => `refused: ${e.message}`,
          );
        const report = await verifyStoreChain(store);
        expect({ g, ok: report.ok, bad: report.firstBad?.reason }).toMatchObject({ ok: true });
        expect(g).toMatch(/^[0-9a-f-]{36}$/);
      } finally {
        await store.close();
      }
    });

    it('two concurrent proposals of the granted run for one unknown operation: one retry only', async () => {
      if (target.kind !== 'postgres') return;
      const batch = newRun();
      await store.createGrant(grantInput(batch, { toolId: null }));
      const key = newKey();
      const first = await unknownOperation(store, key);
      const sibling = await store.openSibling();
      try {
        const [a, b] = await Promise.all([
          store.decide(reserve(batch, key)),
          sibling.decide(reserve(batch, key)),
        ]);
        const allows = [a, b].filter((r) => r.verdict === 'allow');
        expect(allows).toHaveLength(1);
        const cards = await store.listApprovals({ operationId: first.operationId });
        expect(cards.filter((c) => c.state === 'used')).toHaveLength(1);
        expect((await verifyStoreChain(store)).ok).toBe(true);
      } finally {
        await sibling.close();
      }
    });
  });
}

/**
 * Waits (bounded) until `n` backends of this database wait on a lock, or `done()` says the awaited
 * call finished without waiting. Ordering a race by what PostgreSQL reports, not by sleeps.
 */
async function lockWaiters(client: pg.Client, n: number, done: () => boolean = () => false): Promise<void> {
  const until = Date.now() + 10_000;
  for (;;) {
    // The client may be inside its own transaction, which caches what pg_stat_activity shows.
    await client.query('select pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ n: string }>(
      "select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
    );
    if (Number(rows[0]?.n) >= n || done()) return;
    if (Date.now() > until) throw new Error(`fewer than ${n} lock waiters after 10 s`);
    await sleep(20);
  }
}
