import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainOf, computeEventHash, EVENT_CHAINS, verifyChain } from '../../../src/store/audit-chain.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { allEvents, payloadOf as payload, writeHistory } from './audit-history.js';
import type { Allow } from './inputs.js';

for (const target of storeTargets()) {
  describe(`hash-chained event log on ${target.name}`, () => {
    let store: TestStore;
    let retried: Allow;
    let perCall: readonly number[];

    beforeAll(async () => {
      store = await openTestStore(target);
      ({ retried, perCall } = await writeHistory(store));
    });

    afterAll(async () => {
      await store?.close();
    });

    it('appends exactly one event per store call that records something', async () => {
      // The unrecorded pending proposal comes before the looping run's duplicate and halt.
      expect(perCall).toEqual([...Array(perCall.length - 3).fill(1), 0, 1, 1]);
      expect((await allEvents(store)).map((e) => e.type).sort()).toEqual(
        [
          ...Array(5).fill('attempt.outcome'),
          ...Array(6).fill('decision.allow'),
          'decision.hold',
          'decision.block',
          ...Array(2).fill('decision.duplicate'),
          'decision.halted',
          'decision.pending',
        ].sort(),
      );
    });

    it('keeps one operation on one chain, in order, with every fact of each call', async () => {
      const events = await allEvents(store);
      const mine = events.filter((e) => e.operationId === retried.operationId);
      expect(new Set(mine.map((e) => e.chain))).toEqual(new Set([chainOf(retried.operationId)]));
      expect(mine.map((e) => e.seq)).toEqual([...mine.map((e) => e.seq)].sort((a, b) => a - b));
      expect(mine.map((e) => e.type)).toEqual([
        'decision.allow',
        'attempt.outcome',
        'decision.allow',
        'attempt.outcome',
        'decision.allow',
        'attempt.outcome',
      ]);
      const [opened, notSent, retry, , , confirmed] = mine.map(payload);
      // What the gate proposed, verbatim, then what the store decided.
      expect(opened).toMatchObject({
        input: {
          decisionId: retried.decisionId,
          scope: { tenant: 'acme' },
          key: { values: ['acme', 'app', 'title'] },
          request: { host: 'api.github.com' },
        },
        decision: { verdict: 'allow', operationId: retried.operationId, attemptId: retried.attemptId },
        facts: {
          operation: { opened: true },
          attempt: { number: 1, attemptBudget: 3, remainingAttempts: 2 },
          key: { expiresAt: expect.stringMatching(/Z$/) },
        },
      });
      expect(notSent).toMatchObject({
        input: { dispatchState: 'not_sent', operationState: 'failed' },
        facts: {
          number: 1,
          superseded: false,
          stateChange: { from: 'open', to: 'failed' },
          key: { state: 'released' },
        },
      });
      expect(retry).toMatchObject({
        facts: {
          operation: { opened: false, stateChange: { from: 'failed', to: 'open' } },
          attempt: {
            number: 2,
            retryOfAttemptId: retried.attemptId,
            retryReason: 'connection_not_established',
          },
        },
      });
      expect(confirmed).toMatchObject({
        input: { operationState: 'succeeded', destinationRef: 'https://github.com/acme/app/issues/3' },
        facts: { stateChange: { from: 'open', to: 'succeeded' }, key: { state: 'confirmed' } },
      });
      const duplicate = payload(events.find((e) => e.type === 'decision.duplicate')!);
      expect(duplicate).toMatchObject({
        decision: { verdict: 'duplicate' },
        facts: { duplicateSkips: 1, source: { step: 'step-1', attemptId: expect.any(String) } },
      });
      const pending = payload(events.find((e) => e.type === 'decision.pending')!);
      expect(pending).toMatchObject({
        decision: { reason: 'reserved_by_another_run' },
        facts: { operationState: 'open', heldBy: { keyState: 'pending' } },
      });
      const hold = payload(events.find((e) => e.type === 'decision.hold')!);
      expect(hold).toMatchObject({
        decision: { verdict: 'hold', reason: 'outcome_unknown' },
        facts: {
          approval: { id: expect.any(String), created: true },
          previousAttempt: { number: 1, dispatchState: 'sent_no_response' },
          requestChanged: false,
          lastApproval: null,
        },
      });
    });

    it('chains a decision about an operation by its own decision id, and SQL agrees with chainOf', async () => {
      for (const e of await allEvents(store)) {
        const input = payload(e)['input'] as { decisionId: string };
        expect(e.chain).toBe(chainOf(e.operationId ?? input.decisionId));
        expect(e.recordedAtUs).toMatch(/^\d{16}$/);
      }
      const ids = Array.from({ length: 64 }, (_, i) => `id-${i}-é`);
      const rows = await store.query<{ id: string; chain: number }>(
        `select id, eg_chain_of(id) as chain from unnest(array[${ids.map((i) => `'${i}'`).join(',')}]) as id`,
      );
      expect(rows.map((r) => r.chain)).toEqual(ids.map(chainOf));
      expect(await store.chainHeads()).toHaveLength(EVENT_CHAINS);
    });

    it('the JavaScript hash reproduces the database hash of every event', async () => {
      const events = await allEvents(store);
      for (const e of events) expect(computeEventHash(e)).toBe(e.hash);
      expect(await verifyStoreChain(store)).toMatchObject({
        ok: true,
        checked: events.length,
        chains: EVENT_CHAINS,
      });
    });

    it('the database refuses UPDATE, DELETE and TRUNCATE on events', async () => {
      await expect(store.query(`update events set payload = '{}' where seq = 1`)).rejects.toThrow(
        /append-only/,
      );
      await expect(store.query('delete from events where seq = 1')).rejects.toThrow(/append-only/);
      await expect(store.query('truncate events')).rejects.toThrow(/append-only/);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true });
    });

    it('verifyChain detects tampering on an exported copy, on the chain it happened to', async () => {
      const heads = await store.chainHeads();
      const events = await allEvents(store);
      const chain = chainOf(retried.operationId);
      const at = events.flatMap((e, i) => (e.chain === chain ? [i] : []));
      const only = { ok: false, broken: [expect.objectContaining({ chain })] };

      const edited = [...events];
      edited[at[2]!] = { ...events[at[2]!]!, payload: `${events[at[2]!]!.payload} ` };
      expect(await verifyChain(edited, heads)).toMatchObject({ ...only, firstBad: { chain, seq: 3 } });

      const deleted = events.filter((_, i) => i !== at[3]);
      expect(await verifyChain(deleted, heads)).toMatchObject({ ...only, firstBad: { chain, seq: 5 } });

      const inserted = [...events];
      inserted.splice(at[3]!, 0, { ...events[at[3]!]!, payload: '{"forged": true}' });
      expect(await verifyChain(inserted, heads)).toMatchObject({ ...only, firstBad: { chain, seq: 4 } });

      const reordered = [...events];
      [reordered[at[4]!], reordered[at[5]!]] = [events[at[5]!]!, events[at[4]!]!];
      expect(await verifyChain(reordered, heads)).toMatchObject({ ...only, firstBad: { chain, seq: 6 } });

      const truncated = events.filter((_, i) => i !== at.at(-1) && i !== at.at(-2));
      expect(await verifyChain(truncated, heads)).toMatchObject({
        ...only,
        firstBad: { chain, seq: at.length - 1, reason: expect.stringContaining('truncated') },
      });
    });
  });
}
