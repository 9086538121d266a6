/**
 * Recovery keeps the global lock order: eg_recover only lists the orphaned
 * attempts and each one is settled by eg_recover_attempt in its own transaction (key, operation,
 * attempt, then its event's chain head), so a decide of one candidate's key while recovery holds
 * another candidate's chain head cannot deadlock with it (it did when one transaction handled
 * every candidate and appended each event before locking the next key).
 *
 * A third session only holds one chain_head row for a moment (what any commit in flight does:
 * "a head row lock is held through COMMIT"), so the interleaving is deterministic.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../../src/store/index.js';
import { chainOf, uuidv7 } from '../../../src/store/index.js';
import { untilLockWaiters } from '../../helpers/lock-waiters.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, reserve, sleep } from './inputs.js';

const target = storeTargets().find((t) => t.kind === 'postgres');

describe.skipIf(!target)('eg_recover vs a concurrent decide (PostgreSQL)', () => {
  let store: TestStore;
  let recoverer: Store;
  let decider: Store;
  let h: pg.Client;

  beforeAll(async () => {
    store = await openTestStore(target!);
    recoverer = await store.openSibling();
    decider = await store.openSibling();
    h = new pg.Client({ connectionString: store.url });
    await h.connect();
  });

  afterAll(async () => {
    await h?.end().catch(() => undefined);
    await recoverer?.close();
    await decider?.close();
    await store?.close();
  });

  it('recovering two orphaned attempts while a proposal for the second one arrives does not deadlock', async () => {
    // A gate that died with two attempts in flight (keys K1 then K2, long TTLs).
    await store.registerInstance('dead-gate');
    const k1 = newKey();
    const k2 = newKey();
    const a1 = await store.decide(reserve(newRun(), k1, { gateInstance: 'dead-gate' }));
    expectVerdict(a1, 'allow');
    await sleep(5);
    const a2 = await store.decide(reserve(newRun(), k2, { gateInstance: 'dead-gate' }));
    expectVerdict(a2, 'allow');
    await store.stopInstance('dead-gate'); // (or its heartbeat went stale)

    const c1 = chainOf(a1.operationId);
    // The agent of the dead gate retries K2 through a live gate: a pending decision whose event
    // lands on chain c1 (one decision id in 64 does; pick one).
    let decisionId = uuidv7();
    while (chainOf(decisionId) !== c1) decisionId = uuidv7();

    await h.query('begin');
    await h.query(`select * from chain_head where id = ${c1} for update`);
    const recovered = recoverer.recover({
      instanceId: 'live-gate',
      exclusive: false,
      staleAfterMs: 30_000,
      rules: {},
    });
    await untilLockWaiters(h, 1); // recovery: K1, O1, A1 locked, waiting for head c1
    const decided = decider.decide(reserve(newRun(), k2, { decisionId }));
    await untilLockWaiters(h, 2); // decide: K2 locked by its upsert, waiting for head c1
    await h.query('commit');

    const [r, d] = await Promise.allSettled([recovered, decided]);
    const errors = (
      [
        ['recover', r],
        ['decide', d],
      ] as const
    )
      .filter(([, x]) => x.status === 'rejected')
      .map(
        ([who, x]) =>
          `${who}: ${String((x as PromiseRejectedResult).reason?.cause ?? (x as PromiseRejectedResult).reason)}`,
      );
    expect(errors, 'a deadlock between eg_recover and eg_decide').toEqual([]);
  });
});
