/**
 * Group commit under pressure (src/store/group-commit.ts, eg_batch.sql), from a
 * hostile review of it: 40 keys proposed in six rounds from two processes at once (batches,
 * deadlock fallbacks and lone calls mixed) must give at most one allow per key, an outcome for
 * every attempt, one event per decision and an intact chain whose heads agree with their last
 * events; a failed batch leaves nothing queued for the next call; a batch cancelled while it
 * waits is resent call by call; closing the store with calls queued settles every call.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DecideResult, Store } from '../../../src/store/index.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { type Allow, newKey, newRun, outcome, reserve, sleep } from './inputs.js';

for (const target of storeTargets()) {
  describe(`group commit under a storm, a cancel and a close on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });
    const count = async (sql: string): Promise<number> =>
      Number((await store.query<{ n: string }>(sql))[0]!.n);

    it('storm: same keys from two processes, decides and outcomes interleaved; one allow per key, every attempt an outcome, chain ok, times exact', async () => {
      const sibling: Store = target.kind === 'postgres' ? await store.openSibling() : store;
      try {
        const keys = Array.from({ length: 40 }, () => newKey());
        const allowsPerKey = new Map<string, number>();
        const pendingOutcomes: Promise<unknown>[] = [];
        const round = async (s: Store): Promise<void> => {
          const results = await Promise.all(keys.map((k) => s.decide(reserve(newRun(), k))));
          results.forEach((r: DecideResult, i) => {
            if (r.verdict === 'allow') {
              const k = keys[i]!;
              allowsPerKey.set(k.hash, (allowsPerKey.get(k.hash) ?? 0) + 1);
              pendingOutcomes.push(s.recordOutcome(outcome(r as Allow, k, 'succeeded')));
            }
          });
        };
        await Promise.all([round(store), round(sibling), round(store), round(sibling)]);
        await Promise.all(pendingOutcomes);
        await Promise.all([round(store), round(sibling)]);
        await Promise.all(pendingOutcomes);
        for (const k of keys) expect(allowsPerKey.get(k.hash) ?? 0).toBeLessThanOrEqual(1);
        expect(await count('select count(*) as n from attempts where finished_at is null')).toBe(0);
        expect(
          await count(
            `select count(*) as n from events where recorded_at <> timestamptz 'epoch' + recorded_at_us * interval '1 microsecond'
               or (extract(epoch from recorded_at) * 1000000)::bigint <> recorded_at_us`,
          ),
        ).toBe(0);
        expect(
          await count(
            `select count(*) as n from (select recorded_at_us < lag(recorded_at_us) over (partition by chain order by seq) as back from events) x where back`,
          ),
        ).toBe(0);
        // Decisions are projected from their events off the hot path: one row per event, once projected.
        await store.projectEvents({ wait: true, limit: 1_000_000 });
        expect(await count('select count(*) as n from decisions')).toBe(
          await count(`select count(*) as n from events where type like 'decision.%'`),
        );
        expect(
          await count(
            `select count(*) as n from chain_head h where last_us <> coalesce((select recorded_at_us from events e where e.chain = h.id and e.seq = h.last_seq), 0)
               or prev_hash is distinct from (select prev_hash from events e where e.chain = h.id and e.seq = h.last_seq)`,
          ),
        ).toBe(0);
        expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
        // Batches formed (the storm is what group commit is for).
        expect(store.stats.groupCommit.batches + sibling.stats.groupCommit.batches).toBeGreaterThan(0);
      } finally {
        if (sibling !== store) await sibling.close();
      }
    }, 60_000);

    it('a failed batch leaves nothing queued behind: the next lone call on the session appends its own event, at once', async () => {
      const allows = (await Promise.all(
        [newKey(), newKey()].map((k) => store.decide(reserve(newRun(), k))),
      )) as Allow[];
      const bad = { ...allows[0]!, operationId: '01900000-0000-7000-8000-000000000000' };
      const events0 = await count('select count(*) as n from events');
      const r = await Promise.allSettled([
        store.recordOutcome(outcome(bad, null, 'succeeded')),
        store.recordOutcome(outcome(bad, null, 'failed')),
      ]);
      expect(r.map((x) => x.status)).toEqual(['rejected', 'rejected']);
      // A lone decide afterwards (same PGlite session).
      const lone = await store.decide(reserve(newRun(), newKey()));
      expect(lone.verdict).toBe('allow');
      expect(await count('select count(*) as n from events')).toBe(events0 + 1);
      expect(
        await count(
          `select count(*) as n from events where type = 'decision.allow' and operation_id = '${lone.verdict === 'allow' ? lone.operationId : ''}'`,
        ),
      ).toBe(1);
    });

    if (target.kind === 'postgres') {
      it('a batch cancelled while it waits on a lock (57014) is resent call by call, each decide once', async () => {
        const side = new pg.Client({ connectionString: store.url });
        await side.connect();
        try {
          const keys = [newKey(), newKey(), newKey()];
          await side.query('begin');
          await side.query(
            `insert into dedupe_keys (key_hash, tenant, area, agent, tool_id, state, operation_id, attempt_number)
             values ($1, 'acme', 'support', 'triage-bot', 'github.create_issue', 'pending', 'side', 1)`,
            [keys[1]!.hash],
          );
          const inputs = keys.map((k) => reserve(newRun(), k));
          const before = store.stats.groupCommit.fallbacks;
          const p = Promise.allSettled(inputs.map((i) => store.decide(i)));
          // The batch waits on the side's uncommitted key (a busy machine may take a while to get
          // there); then it is cancelled.
          let cancelled = false;
          for (let i = 0; i < 500 && !cancelled; i++) {
            const w = await side.query<{ pid: number }>(
              // Any backend of this database waiting for a lock is the batch (nothing else runs here);
              // not by its query text, which a loaded machine was seen to report late.
              `select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()
               and wait_event_type = 'Lock'`,
            );
            if (w.rows.length > 0) {
              await side.query('select pg_cancel_backend($1)', [w.rows[0]!.pid]);
              cancelled = true;
            } else await sleep(20);
          }
          expect(cancelled).toBe(true);
          await sleep(200);
          await side.query('rollback');
          const r = await p;
          expect(store.stats.groupCommit.fallbacks).toBe(before + 1);
          expect(r.map((x) => x.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
          await store.projectEvents({ wait: true, limit: 1_000_000 });
          for (const i of inputs)
            expect(await count(`select count(*) as n from decisions where id = '${i.decisionId}'`)).toBe(1);
        } finally {
          await side.end();
        }
      });

      it('close() with calls queued: every call settles (no hang)', async () => {
        const s = await store.openSibling();
        const calls = Array.from({ length: 60 }, () => s.decide(reserve(newRun(), newKey())));
        await new Promise((r) => setImmediate(r));
        const closing = s.close();
        const settled = await Promise.race([
          Promise.allSettled(calls),
          sleep(15_000).then(() => 'hang' as const),
        ]);
        await closing;
        expect(settled).not.toBe('hang');
        const res = settled as PromiseSettledResult<DecideResult>[];
        // Each call either committed (answered) or failed with the pool's closing error: none is
        // left pending, none answered twice.
        for (const r of res) {
          if (r.status === 'rejected')
            expect(String((r.reason as Error)?.message)).toMatch(/pool|terminat|end/i);
        }
      }, 30_000);
    }
  });
}
