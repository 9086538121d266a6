/**
 * The lives of one instance id are told apart: `heartbeat` and `stopInstance`
 * speak for the life `registerInstance` answered, so an old life whose close finishes after a new
 * life started (a draining restart, or two same-scope processes sharing the default in-process
 * id) never marks the live one stopped, and no replica's sweep takes its in-flight attempts for
 * orphans.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, reserve } from './inputs.js';

const target = storeTargets().find((t) => t.kind === 'postgres');

describe.skipIf(!target)('old life stops after the new life started (PostgreSQL)', () => {
  let store: TestStore;
  let oldLife: Store;
  let newLife: Store;
  let otherReplica: Store;

  beforeAll(async () => {
    store = await openTestStore(target!);
    oldLife = await store.openSibling();
    newLife = await store.openSibling();
    otherReplica = await store.openSibling();
  });

  afterAll(async () => {
    for (const s of [oldLife, newLife, otherReplica]) await s?.close();
    await store?.close();
  });

  it("another replica's sweep never recovers an attempt the live gate is still running", async () => {
    const id = 'host-a/in-process/acme/support/triage-bot';
    const old = await oldLife.registerInstance(id);
    const current = await newLife.registerInstance(id); // the new life starts while the old one drains
    await newLife.heartbeat(id, current.life);
    const inFlight = await newLife.decide(reserve(newRun(), newKey(), { gateInstance: id }));
    expectVerdict(inFlight, 'allow');
    // The old life's close() finishes: it speaks only for itself, so the new life stays live.
    await oldLife.stopInstance(id, old.life);
    await oldLife.heartbeat(id, old.life);
    await newLife.heartbeat(id, current.life); // the new life is alive and beating

    const swept = await otherReplica.recover({
      instanceId: 'host-b:8080',
      exclusive: false,
      staleAfterMs: 30_000,
      rules: {},
    });
    expect(
      swept.map((r) => r.attemptId),
      'recovered a live attempt as gate_restarted',
    ).not.toContain(inFlight.attemptId);
  });
});
