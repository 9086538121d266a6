/**
 * The real Stripe SDK (stripe-node) through the gate interceptor, against a stand-in that keeps
 * Stripe's idempotency ledger (test/helpers/idempotent-ledger.ts), with the shipped Stripe policy's
 * (policies/stripe.yaml): the SDK's own Idempotency-Key is kept, one create makes one payment, and
 * the same create again is answered by the gate as a duplicate, so the ledger still holds one.
 */
import { readFileSync } from 'node:fs';
import Stripe from 'stripe';
import { Agent, buildConnector, type Dispatcher, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadOperationReport } from '../../../src/admin/index.js';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { type IdempotentLedger, startIdempotentLedger } from '../../helpers/idempotent-ledger.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';

// The shipped Stripe policy: its idempotency dialect (agent_key: keep) and its verdict dialect.
const policies = parsePolicyFiles([
  {
    file: 'stripe.yaml',
    text: readFileSync(new URL('../../../policies/stripe.yaml', import.meta.url), 'utf8'),
  },
]);

/** The SDK calls api.stripe.com; this Agent connects that name to the loopback stand-in. */
function loopbackAgent(): Agent {
  const connect = buildConnector({});
  return new Agent({
    connect: (options, callback) => connect({ ...options, hostname: '127.0.0.1' }, callback),
  });
}

for (const target of storeTargets()) {
  describe(`the Stripe SDK through the gate (${target.name})`, () => {
    let store: TestStore;
    let gate: Gate;
    let ledger: IdempotentLedger;
    let gated: Dispatcher;
    const agent = loopbackAgent();

    beforeAll(async () => {
      store = await openTestStore(target);
      gate = await createGate({
        policies,
        store,
        scope: { tenant: 'acme', area: 'pay', agent: 'bot' },
        resolveGovernedHosts: 'off',
      });
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
        host: 'api.stripe.com',
        port: ledger.upstream.port,
        protocol: 'http',
      });
      const params = { customer: 'cus_1', amount: 2000, currency: 'eur', description: 'order 1001' };
      const created = await stripe.paymentIntents.create(params);
      expect(created.id).toBe('pi_1');

      // The gate answers in Stripe's error shape with Stripe-Should-Retry: false: the SDK raises
      // its typed error and repeats nothing.
      const again = await stripe.paymentIntents.create(params).then(
        () => null,
        (err: unknown) => err as { statusCode?: number; type?: string },
      );
      // Stripe's own word for a repeated request (the verdict dialect): a 400 idempotency error.
      expect(again).toBeInstanceOf(Stripe.errors.StripeIdempotencyError);
      expect(again).toMatchObject({ statusCode: 400 });
      expect(ledger.seen).toHaveLength(1);

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
