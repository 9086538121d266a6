import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OutcomeInput } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

/*
 * The common outcome, a first attempt's answer while it holds its pending key, is written from the
 * key row alone (eg_first_outcome.sql): the attempt's and the operation's rows are each probed once,
 * by the statement that writes them, where the general path reads each first. What must hold: the
 * answer and the rows are what the general path makes (every test store checks on close that the
 * rows are what the events say, test/helpers/trail-check.ts), and every other outcome still takes
 * the general path. The probes are counted around the outcome in one statement
 * (pg_stat_get_xact_numscans over each table's indexes).
 */
for (const target of storeTargets()) {
  describe(`a first attempt's outcome on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    /** Records the outcome in one statement and counts, in its transaction, the index probes of the two tables. */
    async function recordCounting(
      input: OutcomeInput,
    ): Promise<{ answer: { operationState: string }; attempts: number; operations: number }> {
      const probes = (table: string) =>
        sql`(select coalesce(sum(pg_stat_get_xact_numscans(indexrelid)), 0)::int from pg_index
             where indrelid = ${sql.raw(`'${table}'::regclass`)})`;
      // Counts not yet flushed include earlier transactions' since the last flush: what the outcome
      // adds is the difference, read before and after it in one statement (no flush inside one).
      const { rows } = await sql<{ answer: string; attempts: number; operations: number }>`
        with b as materialized (select ${probes('attempts')} as attempts, ${probes('operations')} as operations),
          r as materialized (select eg_record_outcome(${JSON.stringify(input)}) as a from b)
        select r.a::text as answer, ${probes('attempts')} - b.attempts as attempts,
          ${probes('operations')} - b.operations as operations
        from r, b`.execute(store.db);
      const row = rows[0]!;
      return { answer: JSON.parse(row.answer), attempts: row.attempts, operations: row.operations };
    }

    for (const state of ['succeeded', 'failed', 'unknown', 'open', 'accepted'] as const) {
      it(`${state}: answered and written with one probe of the attempt and at most one of the operation`, async () => {
        const key = newKey();
        const allow = await store.decide(reserve(newRun(), key));
        expectVerdict(allow, 'allow');
        const recorded = await recordCounting(outcome(allow, key, state));
        expect(recorded.answer).toEqual({ operationState: state });
        expect(recorded.attempts).toBe(1);
        // An input_required answer leaves the operation open: its row is not written at all.
        expect(recorded.operations).toBe(state === 'open' ? 0 : 1);
        const op = await store.getOperation(allow.operationId);
        expect(op?.state).toBe(state);
        const [keyRow] = await store.query<{ state: string; operation_state: string }>(
          `select state, operation_state from dedupe_keys where key_hash = '${key.hash}'`,
        );
        const keyStates = {
          succeeded: 'confirmed',
          failed: 'released',
          unknown: 'unknown',
          open: 'awaiting_input',
          accepted: 'accepted',
        };
        expect(keyRow).toEqual({ state: keyStates[state], operation_state: state });
      });
    }

    it('a retry’s outcome and an outcome written again take the general path, which reads first', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'failed'));
      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      expect(retry.attemptNumber).toBe(2);
      const recorded = await recordCounting(outcome(retry, key, 'succeeded'));
      expect(recorded.answer).toEqual({ operationState: 'succeeded' });
      expect(recorded.attempts).toBeGreaterThan(1);
      expect(recorded.operations).toBeGreaterThan(1);

      const again = await recordCounting(outcome(retry, key, 'succeeded'));
      expect(again.answer).toEqual({ operationState: 'succeeded', alreadyRecorded: true });
    });
  });
}
