import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHECKSUM_SETTING } from '../../../src/store/functions/index.js';
import type { Store } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { block, expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

/*
 * Decisions are a projection of their events (migration 0019): the hot path appends the
 * decision.<verdict> event only, and the `decisions` rows are made from the events off the hot
 * path. What must hold: no reader ever misses a decision committed before it asked, no decision is
 * projected twice or skipped whatever runs concurrently, and retention never removes an event the
 * projection has not read.
 */
for (const target of storeTargets()) {
  describe(`decisions projected from their events on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    const rows = async (where: string): Promise<number> =>
      Number(
        (await store.rawQuery<{ n: number }>(`select count(*)::int as n from decisions where ${where}`))[0]
          ?.n,
      );

    /** Decision events whose decision has no row, and rows with more than one: both must be 0. */
    const mismatches = async (): Promise<{ missing: number; twice: number; events: number }> => {
      const [r] = await store.rawQuery<{ missing: number; twice: number; events: number }>(
        `select
           (select count(*)::int from events e where e.type like 'decision.%'
              and not exists (select 1 from decisions d where d.id = e.payload::jsonb -> 'input' ->> 'decisionId')) as missing,
           (select count(*)::int from (select id from decisions group by id having count(*) > 1) x) as twice,
           (select count(*)::int from events where type like 'decision.%') as events`,
      );
      return r!;
    };

    it('the hot path writes the decision once, as its event, and a reader sees it at once with every fact', async () => {
      const run = newRun();
      const key = newKey();
      const input = reserve(run, key, { explain: 'tool bench.create_issue, key $.title' });
      const allow = await store.decide(input);
      expectVerdict(allow, 'allow');
      // Nothing but the event yet (unless the reader below is late: no projector runs in this test).
      expect(await rows(`id = '${input.decisionId}'`)).toBe(0);
      expect(await store.getDecision(input.decisionId)).toMatchObject({
        id: input.decisionId,
        runId: run,
        toolId: input.toolId,
        verdict: 'allow',
        operationId: allow.operationId,
        attemptId: allow.attemptId,
        keyHash: key.hash,
        scope: input.scope,
        explain: 'tool bench.create_issue, key $.title',
      });
      await store.recordOutcome(outcome(allow, key, 'succeeded'));
      const again = reserve(newRun(), key);
      expectVerdict(await store.decide(again), 'duplicate');
      const blocked = block(run, 'key_path_missing: $.title');
      await store.decide(blocked);
      expect(await store.listDecisions({ runId: run })).toMatchObject([
        { id: input.decisionId, verdict: 'allow' },
        { id: blocked.decisionId, verdict: 'block', reason: 'key_path_missing: $.title', operationId: null },
      ]);
      expect(await store.countDuplicates([allow.operationId])).toEqual({ [allow.operationId]: 1 });
      expect(await mismatches()).toMatchObject({ missing: 0, twice: 0 });
    });

    it('writers and projectors running at once neither skip nor repeat a decision', async () => {
      const sibling: Store | null = target.kind === 'postgres' ? await store.openSibling() : null;
      try {
        const stores: Store[] = sibling === null ? [store] : [store, sibling];
        let writing = true;
        // Background rounds on every store (as every gate's projector), racing the writers.
        const projectors = stores.map(async (s) => {
          for (let i = 0; i < 10_000 && writing; i++) {
            await s.projectEvents({ wait: false, limit: 3 });
            await new Promise((r) => setTimeout(r, 1));
          }
        });
        const writers = Array.from({ length: 24 }, async (_, w) => {
          const s = stores[w % stores.length]!;
          for (let i = 0; i < 8; i++) {
            const key = i % 2 === 0 ? newKey() : null;
            const d = await s.decide(reserve(newRun(), key));
            if (d.verdict === 'allow') await s.recordOutcome(outcome(d, key, 'succeeded'));
          }
        });
        await Promise.all(writers);
        writing = false;
        await Promise.all(projectors);
        // A reader catches up with whatever the background left.
        await store.listDecisions({ runId: 'none' });
        const m = await mismatches();
        expect(m).toMatchObject({ missing: 0, twice: 0 });
        expect(await rows('true')).toBe(m.events);
      } finally {
        await sibling?.close();
      }
    });

    it('a row already there (a previous version wrote one too) is left as it is', async () => {
      const input = reserve(newRun(), newKey());
      await store.decide(input);
      await store.rawQuery(
        `insert into decisions (id, run_id, tool_id, verdict, tenant, area, agent, explain)
         values ('${input.decisionId}', '${input.runId}', '${input.toolId}', 'allow', 'acme', 'support', 'triage-bot', 'written by the previous version')`,
      );
      expect(await store.getDecision(input.decisionId)).toMatchObject({
        explain: 'written by the previous version',
      });
      expect(await rows(`id = '${input.decisionId}'`)).toBe(1);
    });

    it('retention never cuts past what the projection has read', async () => {
      await store.decide(reserve(newRun(), newKey()));
      await store.projectEvents({ wait: true, limit: 1_000_000 });
      // A projection that has read nothing (as if it lagged): its last snapshot saw no transaction
      // as committed. No chain may be cut past it.
      await store.rawQuery(
        `update log_projection set after_snapshot = '1:1:', target_snapshot = null, through_pos = 0`,
      );
      const [cuts] = await store.rawQuery<{ cuts: { chain: number; cutSeq: number }[] | string }>(
        `select eg_prune_cut(now() + interval '1 day') as cuts`,
      );
      const list = typeof cuts!.cuts === 'string' ? JSON.parse(cuts!.cuts) : cuts!.cuts;
      expect(list.every((c: { cutSeq: number }) => Number(c.cutSeq) === 0)).toBe(true);
      const [head] = await store.rawQuery<{ id: number; last_seq: string; last_hash: string }>(
        'select id, last_seq, last_hash from chain_head where last_seq > 0 order by id limit 1',
      );
      await expect(
        store.pruneChain({
          chain: head!.id,
          baseSeq: 0,
          baseHash: '0'.repeat(64),
          cutSeq: Number(head!.last_seq),
          cutHash: head!.last_hash,
        }),
      ).rejects.toMatchObject({ code: 'EG_ERR_AUDIT_CHAIN_BROKEN' });
      // Caught up again (re-reading is harmless: rows already there stay), retention may cut.
      await store.projectEvents({ wait: true, limit: 1_000_000 });
      expect(await mismatches()).toMatchObject({ missing: 0, twice: 0 });
      expect(
        (await store.retentionCuts(new Date(Date.now() + 86_400_000).toISOString())).some(
          (c) => c.cutSeq > 0,
        ),
      ).toBe(true);
      // An upgraded store before its first projection by snapshot: the frontiers of the versions
      // before say what is projected (nothing, here), until the drain (eg_project_legacy.sql).
      await store.rawQuery('update log_projection set after_snapshot = null');
      await store.rawQuery('update event_projection set seq = 0');
      const [old] = await store.rawQuery<{ cuts: { chain: number; cutSeq: number }[] | string }>(
        `select eg_prune_cut(now() + interval '1 day') as cuts`,
      );
      const oldList = typeof old!.cuts === 'string' ? JSON.parse(old!.cuts) : old!.cuts;
      expect(oldList.every((c: { cutSeq: number }) => Number(c.cutSeq) === 0)).toBe(true);
      await store.projectEvents({ wait: true, limit: 1_000_000 });
      expect(await mismatches()).toMatchObject({ missing: 0, twice: 0 });
    });

    it('an upgraded store starts projecting at its chains’ heads, so its past decisions are not made twice', async () => {
      const old = await openTestStore(target);
      try {
        for (let i = 0; i < 5; i++) await old.decide(reserve(newRun(), newKey()));
        await old.projectEvents({ wait: true, limit: 1_000_000 });
        // As the store looked before migration 0019: its decisions rows were written with the events.
        await old.rawQuery('drop table event_projection');
        // The migrations after it run again as they are (0020 adds a column only if it is missing).
        await old.rawQuery(`delete from kysely_migration where name >= '0019-decision-projection'`);
        await old.rawQuery(`delete from settings where name = '${CHECKSUM_SETTING}'`);
        await old.migrate();
        const [{ behind }] = (await old.rawQuery<{ behind: number }>(
          'select count(*)::int as behind from event_projection f join chain_head h on h.id = f.chain where f.seq <> h.last_seq',
        )) as [{ behind: number }];
        expect(behind).toBe(0);
        for (let i = 0; i < 5; i++) await old.decide(reserve(newRun(), newKey()));
        await old.listDecisions({ runId: 'none' });
        const [r] = await old.rawQuery<{ events: number; rows: number }>(
          `select (select count(*)::int from events where type like 'decision.%') as events,
                  (select count(*)::int from decisions) as rows`,
        );
        expect(r).toEqual({ events: 10, rows: 10 });
      } finally {
        await old.close();
      }
    });
  });
}
