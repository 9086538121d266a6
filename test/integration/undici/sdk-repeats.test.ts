/**
 * An SDK's automatic repeats of one call are not proposals. stripe-node repeats a 409 twice on its
 * own, with the Idempotency-Key it made for the call, so before Stripe's dialect one agent call
 * was three duplicate proposals and a named run was halted on the agent's second call. Here the
 * Stripe tool answers problem+json 409 (`verdict: { protocol: http }`, what every tool got before
 * dialects), so stripe-node does retry: each repeat is answered and recorded as a duplicate, and
 * only each call of the agent's counts towards the halt.
 */
import { readFileSync } from 'node:fs';
import Stripe from 'stripe';
import { Agent, buildConnector, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { startUpstream, type Upstream } from '../../helpers/upstream.js';

const shipped = readFileSync(new URL('../../../policies/stripe.yaml', import.meta.url), 'utf8');
const asProblemJson = shipped.replaceAll('verdict: { protocol: stripe }', 'verdict: { protocol: http }');
const policies = parsePolicyFiles([{ file: 'stripe-problem-json.yaml', text: asProblemJson }]);

for (const target of storeTargets()) {
  describe(`stripe-node's own retries against a named run (${target.name})`, () => {
    let store: TestStore;
    let gate: Gate;
    let standIn: Upstream;
    let agent: Agent;

    beforeAll(async () => {
      expect(asProblemJson).not.toBe(shipped);
      store = await openTestStore(target);
      gate = await createGate({
        policies,
        store,
        scope: { tenant: 'acme', area: 'billing', agent: 'sdk-bot' },
        resolveGovernedHosts: 'off',
      });
      standIn = await startUpstream((_req, res) => {
        const text = JSON.stringify({ id: `pi_${standIn.requests.length}`, object: 'payment_intent' });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      });
      const connect = buildConnector({});
      agent = new Agent({ connect: (o, cb) => connect({ ...o, hostname: '127.0.0.1' }, cb) });
    });

    afterAll(async () => {
      await agent?.close();
      await gate?.close();
      await standIn?.close();
      await store?.close();
    });

    it('counts each call once: three calls told "done" (each sent three times), the fourth halts', async () => {
      const gated = agent.compose(gateInterceptor(gate, { run: 'checkout-run' }));
      const stripe = new Stripe('sk_test_effectgate', {
        host: 'api.stripe.com',
        port: standIn.port,
        protocol: 'http',
        httpClient: Stripe.createFetchHttpClient(((url: string, init: object) =>
          undiciFetch(url, { ...init, dispatcher: gated } as never)) as never),
        maxNetworkRetries: 2,
      });
      const order = { customer: 'cus_9', amount: 500, currency: 'eur', description: 'order 77' };
      expect((await stripe.paymentIntents.create(order)).id).toBe('pi_1');

      // A problem+json 409 has no `error` member: stripe-node resolves it, after its own two retries.
      const answers: Record<string, unknown>[] = [];
      for (let call = 0; call < 4; call++)
        answers.push((await stripe.paymentIntents.create(order)) as unknown as Record<string, unknown>);
      expect(answers.map((a) => a['verdict'])).toEqual(['duplicate', 'duplicate', 'duplicate', 'halted']);
      expect(answers.map((a) => a['duplicate_skips'])).toEqual([1, 2, 3, 3]);

      expect(standIn.requests).toHaveLength(1);
      const [operation] = await store.listOperations({ toolId: 'stripe.create_payment_intent' });
      // Every repeat reached the gate and is in the trail: three calls, three proposals each.
      expect(await store.countDuplicates([operation!.id])).toEqual({ [operation!.id]: 9 });
      const [run] = await store.listRuns({ runId: 'checkout-run' });
      expect(run!.haltedAt).not.toBeNull();
      expect(run!.keys).toMatchObject([{ skips: 3 }]);
      const rows = await store.query<{ call_repeats: number }>(
        "select call_repeats from run_key_skips where run_id = 'checkout-run'",
      );
      expect(rows).toEqual([{ call_repeats: 2 }]);
    });
  });
}
