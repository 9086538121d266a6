/**
 * Halts racing releases and duplicates from two store connections (PostgreSQL; eg_decide step a,
 * eg_release_run; from the run model's hostile review). Invariants:
 * no decide or release fails with anything but the documented EG_ERR_RUN_STATE; every release has
 * exactly one run.released event; every release ended a halt made by a loop_breaker decision; the
 * trail verifies.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/index.js';
import { verifyStoreChain } from '../../src/store/store-events.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from '../integration/store/inputs.js';

const target = storeTargets().find((t) => t.kind === 'postgres');

describe.skipIf(target === undefined)(
  `halts racing releases (postgres${target === undefined ? ': skipped, needs a second PostgreSQL connection' : ''})`,
  () => {
    let store: TestStore;
    let sibling: Store;
    beforeAll(async () => {
      store = await openTestStore(target!);
      sibling = await store.openSibling();
    });
    afterAll(async () => {
      await sibling?.close();
      await store?.close();
    });

    it('keeps the record straight: one event per release, each ending a real halt, and the trail verifies', async () => {
      const keys = await Promise.all(
        Array.from({ length: 3 }, async () => {
          const key = newKey();
          const first = await store.decide(reserve(newRun(), key));
          expectVerdict(first, 'allow');
          await store.recordOutcome(outcome(first, key, 'succeeded'));
          return key;
        }),
      );
      const run = newRun();
      const errors: string[] = [];
      let stop = false;
      const looper = async (s: Store) => {
        for (let i = 0; i < 120; i++) {
          await Promise.all(
            keys.map((k) =>
              s.decide(reserve(run, k, { maxDuplicateSkips: 1 })).catch((e: Error & { code?: string }) => {
                errors.push(`decide: ${e.code} ${e.message}`);
              }),
            ),
          );
        }
      };
      const releaser = async (s: Store) => {
        while (!stop) {
          await s
            .releaseRun({ runId: run, scope: null, by: 'a', reason: 'b' })
            .catch((e: Error & { code?: string }) => {
              if (e.code !== 'EG_ERR_RUN_STATE' && e.code !== 'EG_ERR_NOT_FOUND')
                errors.push(`release: ${e.code} ${e.message}`);
            });
        }
      };
      const rel = Promise.all([releaser(store), releaser(sibling)]);
      await Promise.all([looper(store), looper(sibling)]);
      stop = true;
      await rel;
      expect(errors.slice(0, 5)).toEqual([]);
      const [{ n: releases } = { n: '0' }] = await store.query<{ n: string }>(
        `select count(*) as n from run_releases where run_id = '${run}'`,
      );
      const [{ n: events } = { n: '0' }] = await store.query<{ n: string }>(
        `select count(*) as n from events where type = 'run.released' and payload::jsonb -> 'facts' ->> 'runId' = '${run}'`,
      );
      expect(Number(events)).toBe(Number(releases));
      // Decisions are a projection of their events: bring it up to date before reading the table.
      await store.projectEvents({ wait: true, limit: 1_000_000 });
      const orphans = await store.query(
        `select r.id from run_releases r left join decisions d on d.id = r.halt_decision_id
          where r.run_id = '${run}' and (d.id is null or d.verdict <> 'halted' or d.reason not like 'loop_breaker:%')`,
      );
      expect(orphans).toEqual([]);
      const dupHalts = await store.query(
        `select halt_decision_id, count(*) from run_releases where run_id = '${run}' group by 1 having count(*) > 1`,
      );
      expect(dupHalts).toEqual([]);
      const report = await verifyStoreChain(store);
      expect(report.ok, JSON.stringify(report.firstBad)).toBe(true);
      // The race really ran: the run was halted and released again and again.
      expect(Number(releases)).toBeGreaterThan(1);
    }, 120_000);
  },
);
