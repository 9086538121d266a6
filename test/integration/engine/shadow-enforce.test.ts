/**
 * Shadow mode must not weaken enforce mode (found by a hostile review of shadow mode):
 * nothing a shadow tool leaves behind may change what the same tool does once a reload moves it
 * to enforce. A keyless shadow attempt is never "honored" by a keyed retry (a second charge), and
 * the would_duplicates a run got 201s for are not skips it was told about (a halt). The
 * destination's ledger is the ground truth.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { type LedgerDestination, startLedgerDestination } from '../../fault/ledger-destination.js';
import { effectPost, headerOf } from '../../helpers/ledger-requests.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';

const policyText = (mode: string): string => `
version: 1
loop_breaker: { max_duplicate_skips: 2 }
tools:
  - id: pay.charge
    match: { hosts: [127.0.0.1], method: POST, path: "/charges/effects" }
    effect: financial
    dedupe: { key: [$.body.order], window: 1h, pending_ttl: 5s, wait: 0s }
    idempotency: { header: Idempotency-Key, honored: true }
    ${mode}
  - id: ticket.create
    match: { hosts: [127.0.0.1], method: POST, path: "/tickets/effects" }
    effect: create
    dedupe: { key: [$.body.order], window: 1h, wait: 0s }
    ${mode}
`;

const scope = { tenant: 'acme', area: 'billing', agent: 'review-bot' };

for (const target of storeTargets()) {
  describe(`what shadow leaves for enforce (${target.name})`, () => {
    let store: TestStore;
    let dest: LedgerDestination;
    let client: UpstreamClient;
    const gates: Gate[] = [];
    const gate = async (): Promise<Gate> => {
      const g = await createGate({
        policies: parsePolicyFiles([{ file: 'p.yaml', text: policyText('mode: shadow') }]),
        store,
        scope,
        instanceId: `review-${gates.length}`,
        analysisThreads: 0,
      });
      gates.push(g);
      return g;
    };
    const toEnforce = (g: Gate): Promise<unknown> =>
      g.reload(parsePolicyFiles([{ file: 'p.yaml', text: policyText('') }]));
    const effectsOf = (order: string): number =>
      dest.ledger().filter((e) => e.order === order && !e.replayed).length;

    beforeAll(async () => {
      store = await openTestStore(target);
      // `charges` honours Idempotency-Key, as the policy declares (honored: true).
      dest = await startLedgerDestination({ honors: (c) => c === 'charges' });
      client = createUpstreamClient();
    });

    afterAll(async () => {
      for (const g of gates) await g.close();
      await client?.close();
      await dest?.close();
      await store?.close();
    });

    it('an unknown outcome made in shadow (sent without Idempotency-Key) is never retried "honored" in enforce: no second effect', async () => {
      const g = await gate();
      dest.plan('o-honored', { behaviour: 'commit-and-drop' });
      const lost = await g.handle(effectPost(dest, 'charges', 'o-honored', 'run-h'), client.send);
      expect(lost.status).toBe(502);
      // The effect happened once, without the key the retry will carry.
      expect(
        dest
          .ledger()
          .filter((e) => e.order === 'o-honored')
          .map((e) => e.idempotencyKey),
      ).toEqual([null]);
      await toEnforce(g);
      const retry = await g.handle(effectPost(dest, 'charges', 'o-honored', 'run-h'), client.send);
      // Enforce mode must not claim the destination's idempotency covers an attempt that never
      // carried the key: hold (or reconcile), never an allow that performs the charge again.
      // It is held for a person (428), as a tool without honored idempotency would be.
      expect({ status: retry.status, effects: effectsOf('o-honored') }).toEqual({
        status: 428,
        effects: 1,
      });
    });

    it("a run's shadow would_duplicates do not count as skips it was told about: its first enforced duplicate is a 409, not a halt", async () => {
      const g = await gate();
      const verdicts: (string | undefined)[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await g.handle(effectPost(dest, 'tickets', 'o-skips', 'run-s'), client.send);
        verdicts.push(headerOf(res, 'effectgate-verdict'));
      }
      expect(verdicts).toEqual(['allow', 'would_duplicate', 'would_duplicate']);
      await toEnforce(g);
      const first = await g.handle(effectPost(dest, 'tickets', 'o-skips', 'run-s'), client.send);
      // The run was never told once that the effect is done (it got 201s): enforce's loop breaker
      // ("a run told N times") must start from its first real 409.
      expect(headerOf(first, 'effectgate-verdict')).toBe('duplicate');
      expect((await store.listRuns({ halted: true })).map((r) => r.id)).not.toContain('run-s');
    });
  });
}
