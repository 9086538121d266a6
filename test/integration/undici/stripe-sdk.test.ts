/**
 * The real Stripe SDK (stripe-node) through the gate interceptor, against a stand-in that keeps
 * Stripe's idempotency ledger (test/helpers/idempotent-ledger.ts), with the shipped Stripe policy's
 * dialect: the SDK's own Idempotency-Key is kept, one create makes one payment, and the same
 * create again is answered by the gate as a duplicate, so the ledger still holds one payment.
 */
import Stripe from 'stripe';
import { Agent, type Dispatcher, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadOperationReport } from '../../../src/admin/index.js';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { type IdempotentLedger, startIdempotentLedger } from '../../helpers/idempotent-ledger.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';

// policies/stripe.yaml's payment tool, on the stand-in's loopback host.
const policies = parsePolicyFiles([
  {
    file: 'stripe.yaml',
    text: `
version: 1
tools:
  - id: stripe.create_payment_intent
    match: { hosts: [127.0.0.1], method: POST, path: /v1/payment_intents }
    effect: financial
    dedupe:
      key: [$.body.customer, $.body.amount, $.body.currency, $.body.description]
      window: 24h
      wait: 0s
    idempotency: { header: Idempotency-Key, max_length: 255, retention: 24h, agent_key: keep, honored: true }
    response: { ref: $.id, replayed_header: Idempotent-Replayed }
`,
  },
]);

for (const target of storeTargets()) {
  describe(`the Stripe SDK through the gate (${target.name})`, () => {
    let store: TestStore;
    let gate: Gate;
    let ledger: IdempotentLedger;
    let gated: Dispatcher;
    const agent = new Agent();

    beforeAll(async () => {
      store = await openTestStore(target);
      gate = await createGate({ policies, store, scope: { tenant: 'acme', area: 'pay', agent: 'bot' } });
      ledger = await startIdempotentLedger();
      gated = agent.compose(gateInterceptor(gate, { run: 'stripe-run' }));
    });

    afterAll(async () => {
      await agent.close();
      await gate?.close();
      await ledger?.close();
      await store?.close();
    });

    it('one create is one payment under the SDK key; the same create again is a duplicate', async () => {
      const fetchWithGateDispatcher = ((url: string, init: Record<string, unknown>) =>
        undiciFetch(url, { ...init, dispatcher: gated } as never)) as unknown as typeof fetch;
      const stripe = new Stripe('sk_test_stand_in', {
        httpClient: Stripe.createFetchHttpClient(fetchWithGateDispatcher),
        host: '127.0.0.1',
        port: ledger.upstream.port,
        protocol: 'http',
      });
      const params = { customer: 'cus_1', amount: 2000, currency: 'eur', description: 'order 1001' };
      const created = await stripe.paymentIntents.create(params);
      expect(created.id).toBe('pi_1');

      // The gate's 409 is a problem+json without Stripe's `error` member: stripe-node retries a 409
      // (twice by default, each answered duplicate again) and then hands the body back as if it
      // were the resource, with the status on lastResponse.
      const again = (await stripe.paymentIntents.create(params)) as unknown as Record<string, unknown> & {
        lastResponse: { statusCode: number };
      };
      expect(again.lastResponse.statusCode).toBe(409);
      expect(again).toMatchObject({ verdict: 'duplicate', source: { destination_ref: 'pi_1' } });

      // The destination's own ledger: one payment, under the key the SDK made.
      expect(ledger.created).toHaveLength(1);
      const sdkKey = ledger.created[0]!.key;
      expect(sdkKey).toMatch(/^stripe-node-retry-/);
      const operation = (await store.listOperations({ limit: 10 }))[0]!;
      const report = await loadOperationReport(store, operation.id);
      const attempts = report!.trail.timeline.filter((e) => e.type === 'attempt');
      expect(attempts).toHaveLength(1);
      expect(attempts[0]).toMatchObject({
        idempotency_key: sdkKey,
        agent_idempotency_key: sdkKey,
        gate_idempotency_key: operation.id,
        status: 200,
      });
    });
  });
}
