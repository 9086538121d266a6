/**
 * The projection by snapshot (eg_project.sql) beside the rare paths that bring one operation's
 * rows up to date themselves (eg_project_operation.sql), with no frontier lock between them. What
 * could make the trail's tables lie, asked against the real functions:
 * - an older batch applied over rows that hold newer events: the rows must not go back (on both
 *   stores, one call after another);
 * - a projector round that read an operation's older events before an operator's resolution of it
 *   committed, and waited for its row: the resolution must stand (PostgreSQL: two sessions);
 * - a rare path whose first catch-up could not see the row a projector round was inserting: its
 *   second read must give it the outcome it missed, or it decides from a row without it
 *   (PostgreSQL).
 * Every test store also compares its rows with the events as it closes (trail-check.ts).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHECKSUM_SETTING } from '../../../src/store/functions/index.js';
import type { ObservationInput } from '../../../src/store/index.js';
import { untilLockWaiters } from '../../helpers/lock-waiters.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { type Allow, expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

function resolution(operationId: string): ObservationInput {
  return {
    operationId,
    kind: 'operator_decision',
    by: 'alice@example.com',
    reason: 'checked the destination',
    settles: 'succeeded',
    status: null,
    destinationRef: null,
    refs: [],
    payloadFingerprint: null,
    source: 'cli',
  };
}

for (const target of storeTargets()) {
  describe(`the projection beside the rare paths on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    const stateOf = async (operationId: string): Promise<string | undefined> =>
      (await store.rawQuery<{ state: string }>(`select state from operations where id = '${operationId}'`))[0]
        ?.state;

    /** An operation whose outcome was unknown, its proposal projected before its outcome was recorded. */
    async function unknownAfterProjection(): Promise<Allow> {
      const key = newKey();
      const first = (await store.decide(reserve(newRun(), key))) as Allow;
      expectVerdict(first, 'allow');
      await store.projectEvents({ wait: true });
      await store.recordOutcome(outcome(first, key, 'unknown'));
      return first;
    }

    it('an older batch applied over rows that hold newer events changes nothing', async () => {
      const first = await unknownAfterProjection();
      await store.addObservation(resolution(first.operationId));
      expect((await store.getOperation(first.operationId))?.state).toBe('succeeded');
      const [unknown] = await store.rawQuery<{ pos: string }>(
        `select pos::text from events where operation_id = '${first.operationId}' and type = 'attempt.outcome'`,
      );
      await store.rawQuery(`select eg_project_rows(array[${unknown!.pos}]::bigint[])`);
      expect(await stateOf(first.operationId)).toBe('succeeded');
    });

    it('an upgraded store has the events its old projection had not reached projected once, then projects by snapshot', async () => {
      const old = await openTestStore(target);
      try {
        const key = newKey();
        const first = (await old.decide(reserve(newRun(), key))) as Allow;
        expectVerdict(first, 'allow');
        await old.recordOutcome(outcome(first, key, 'succeeded'));
        const pending = await old.decide(reserve(newRun(), key));
        expectVerdict(pending, 'duplicate');
        // As a store of the version before looked: rows and decisions only up to its per-chain
        // frontiers, which never moved here (this test store was made at the newest version), so
        // every event above is one the old projection had not reached.
        await old.rawQuery('delete from attempts');
        await old.rawQuery('delete from decisions');
        await old.rawQuery('delete from operations');
        await old.rawQuery('drop table log_projection');
        await old.rawQuery('alter table operations drop column event_pos');
        await old.rawQuery(`delete from kysely_migration where name >= '0025-projection-by-snapshot'`);
        await old.rawQuery(`delete from settings where name = '${CHECKSUM_SETTING}'`);
        await old.migrate();
        const [counts] = await old.rawQuery<{ decisions: number; attempts: number }>(
          `select (select count(*)::int from decisions) as decisions, (select count(*)::int from attempts) as attempts`,
        );
        expect(counts).toEqual({ decisions: 2, attempts: 1 });
        expect(
          (
            await old.rawQuery<{ state: string }>(
              `select state from operations where id = '${first.operationId}'`,
            )
          )[0]?.state,
        ).toBe('succeeded');
        const later = await old.decide(reserve(newRun(), newKey()));
        expectVerdict(later, 'allow');
        expect(await old.getOperation(later.operationId)).toMatchObject({ state: 'open' });
      } finally {
        await old.close();
      }
    });

    if (target.kind === 'postgres') {
      async function clients(n: number): Promise<pg.Client[]> {
        const list = Array.from({ length: n }, () => new pg.Client({ connectionString: store.url }));
        await Promise.all(list.map((c) => c.connect()));
        return list;
      }

      async function end(list: readonly pg.Client[]): Promise<void> {
        await Promise.all(list.map((c) => c.query('rollback').catch(() => undefined)));
        await Promise.all(list.map((c) => c.end()));
      }

      it("a projector round that read an operation's older events never moves its row back over an operator's resolution", async () => {
        const unknown = await unknownAfterProjection();
        const [resolver, projector, side] = await clients(3);
        try {
          // The resolution brings the rows up to date, settles them, and holds them until it commits.
          await resolver!.query('begin');
          await resolver!.query('select eg_add_observation($1)', [
            JSON.stringify(resolution(unknown.operationId)),
          ]);
          // A round's batch: the operation's events before the resolution, which it cannot see yet.
          const round = projector!.query('select eg_project(5000, true)');
          await untilLockWaiters(side!, 1);
          await resolver!.query('commit');
          await round;
          expect(await stateOf(unknown.operationId)).toBe('succeeded');
        } finally {
          await end([resolver!, projector!, side!]);
        }
        expect((await store.getOperation(unknown.operationId))?.state).toBe('succeeded');
      });

      it('a rare path that could not see the row a projector round was inserting reads again: an outcome sent twice is recorded once', async () => {
        const key = newKey();
        const first = (await store.decide(reserve(newRun(), key))) as Allow;
        expectVerdict(first, 'allow');
        const [projector, reporter, side] = await clients(3);
        try {
          // A round inserts the operation's rows from its proposal, and has not committed.
          await projector!.query('begin');
          await projector!.query('select eg_project(5000, true)');
          // Its outcome commits meanwhile: the hot path writes the key and the event only.
          await store.recordOutcome(outcome(first, key, 'failed'));
          // The same outcome again (a gate that did not hear the first answer sends it again): the
          // general path reads the attempt's row, and its insert waits for the round's.
          const again = reporter!.query<{ r: { operationState: string } }>(
            'select eg_record_outcome($1) as r',
            [JSON.stringify(outcome(first, key, 'failed'))],
          );
          await untilLockWaiters(side!, 1);
          await projector!.query('commit');
          expect((await again).rows[0]!.r.operationState).toBe('failed');
        } finally {
          await end([projector!, reporter!, side!]);
        }
        // Read without the outcome it had missed, the attempt would have had none, and the second
        // report would have been recorded as a second outcome.
        const outcomes = await store.rawQuery<{ n: number }>(
          `select count(*)::int as n from events where operation_id = '${first.operationId}' and type = 'attempt.outcome'`,
        );
        expect(outcomes[0]!.n).toBe(1);
        expect((await store.getOperation(first.operationId))?.state).toBe('failed');
      });
    }
  });
}
