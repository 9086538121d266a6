/**
 * Each vendor's own SDK against the shipped policies (`policies/stripe.yaml`, `slack.yaml`,
 * `github.yaml`) through the in-process gate: stripe-node with its fetch HTTP client,
 * `@slack/web-api` and `@octokit/rest` with a fetch whose dispatcher is the gate interceptor. The
 * SDKs call the real API host names (`http://api.stripe.com:<port>`); the Agent under the gate
 * connects those names to loopback stand-ins that keep a ledger of what reached them.
 *
 * A duplicate must raise the SDK's ordinary typed error carrying the gate's reason, the stand-in
 * must have seen the effect once, and the trail must count one duplicate proposal: none of the
 * SDK's automatic retries (stripe-node repeats a 409 twice, `@slack/web-api` any status but 200)
 * reached the gate. The same holds for what the gate answers without a verdict: arguments it
 * refuses, and a store outage (fail closed), each reaching the gate once.
 */
import { readFileSync } from 'node:fs';
import { Octokit } from '@octokit/rest';
import { type WebAPIPlatformError, WebClient } from '@slack/web-api';
import Stripe from 'stripe';
import { Agent, buildConnector, type Dispatcher, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { startUpstream, type Upstream } from '../../helpers/upstream.js';

const shipped = (file: string): { file: string; text: string } => ({
  file,
  text: readFileSync(new URL(`../../../policies/${file}`, import.meta.url), 'utf8'),
});
const policies = parsePolicyFiles([shipped('stripe.yaml'), shipped('slack.yaml'), shipped('github.yaml')]);

/** Every host name the SDKs call is connected to the loopback stand-in on the same port. */
function loopbackAgent(): Agent {
  const connect = buildConnector({});
  return new Agent({
    connect: (options, callback) => connect({ ...options, hostname: '127.0.0.1' }, callback),
  });
}

type Fetch = typeof globalThis.fetch;

/** A WHATWG fetch dispatched through `dispatcher` (what each SDK is given as its fetch). */
function fetchThrough(dispatcher: Dispatcher): Fetch {
  return ((input: string | URL, init?: RequestInit) =>
    undiciFetch(input as string, { ...(init as object), dispatcher } as never)) as unknown as Fetch;
}

/** `fetch` counting the requests it makes: what the gate saw, SDK retries included. */
function counting(fetch: Fetch): { fetch: Fetch; calls: () => number } {
  let calls = 0;
  return {
    fetch: ((input: string | URL, init?: RequestInit) => {
      calls += 1;
      return fetch(input, init);
    }) as Fetch,
    calls: () => calls,
  };
}

/** The error `promise` rejects with; resolving fails the test with `what`. */
async function rejection<E>(promise: Promise<unknown>, what: string): Promise<E> {
  return promise.then(
    () => {
      throw new Error(what);
    },
    (e: unknown) => e as E,
  );
}

function json(res: import('node:http').ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

for (const target of storeTargets()) {
  describe(`vendor SDKs read the gate's verdicts in their own dialect (${target.name})`, () => {
    let store: TestStore;
    let gate: Gate;
    let standIn: Upstream;
    let agent: Agent;

    beforeAll(async () => {
      store = await openTestStore(target);
      gate = await createGate({
        policies,
        store,
        scope: { tenant: 'acme', area: 'billing', agent: 'sdk-bot' },
        resolveGovernedHosts: 'off',
      });
      // One stand-in for the three APIs: each answers its own path the way the API does.
      standIn = await startUpstream((req, res) => {
        const n = standIn.requests.length;
        if (req.url === '/v1/payment_intents')
          return json(res, 200, { id: `pi_${n}`, object: 'payment_intent', status: 'requires_confirmation' });
        if (req.url === '/api/chat.postMessage')
          return json(res, 200, { ok: true, channel: 'C0123456', ts: `1700000000.00010${n}` });
        if (req.url === '/repos/acme/widgets/issues')
          return json(res, 201, { number: n, html_url: `https://github.com/acme/widgets/issues/${n}` });
        return json(res, 404, { message: 'Not Found' });
      });
      agent = loopbackAgent();
    });

    afterAll(async () => {
      await agent?.close();
      await gate?.close();
      await standIn?.close();
      await store?.close();
    });

    const gatedFetch = (run: string): Fetch => fetchThrough(agent.compose(gateInterceptor(gate, { run })));
    const ledger = (path: string): number => standIn.requests.filter((r) => r.url === path).length;

    async function duplicatesOf(toolId: string): Promise<number> {
      const operations = await store.listOperations({ toolId });
      expect(operations).toHaveLength(1);
      const id = operations[0]!.id;
      return (await store.countDuplicates([id]))[id] ?? 0;
    }

    it('stripe-node: a duplicate payment is a StripeIdempotencyError with the gate’s reason, retried by no one', async () => {
      const stripe = new Stripe('sk_test_effectgate', {
        host: 'api.stripe.com',
        port: standIn.port,
        protocol: 'http',
        httpClient: Stripe.createFetchHttpClient(gatedFetch('stripe-run')),
        // stripe-node's own default on Node: it would repeat a 409 or a 5xx twice.
        maxNetworkRetries: 2,
      });
      const order = { customer: 'cus_123', amount: 2000, currency: 'eur', description: 'order 1001' };
      const first = await stripe.paymentIntents.create(order);
      expect(first.id).toBe('pi_1');

      const error = await stripe.paymentIntents.create(order).then(
        (pi) => {
          throw new Error(`resolved as a PaymentIntent: ${JSON.stringify(pi)}`);
        },
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(Stripe.errors.StripeIdempotencyError);
      const stripeError = error as InstanceType<typeof Stripe.errors.StripeIdempotencyError>;
      expect(stripeError.statusCode).toBe(400);
      expect(stripeError.code).toBe('effectgate_duplicate');
      expect(stripeError.message).toContain('was already carried out by run stripe-run');
      expect(stripeError.message).toContain('stripe.create_payment_intent');
      expect(stripeError.raw).toMatchObject({ effectgate: { verdict: 'duplicate', status: 409 } });

      expect(ledger('/v1/payment_intents')).toBe(1);
      expect(await duplicatesOf('stripe.create_payment_intent')).toBe(1);
    });

    it('@slack/web-api: a duplicate message is a WebAPIPlatformError (200, ok: false), not retried', async () => {
      const slack = new WebClient('xoxb-effectgate', {
        slackApiUrl: `http://slack.com:${standIn.port}/api/`,
        fetch: gatedFetch('slack-run'),
      });
      const message = { channel: 'C0123456', text: 'Deploy of api v42 failed' };
      expect((await slack.chat.postMessage(message)).ok).toBe(true);

      const error = await slack.chat.postMessage(message).then(
        () => {
          throw new Error('the duplicate was answered ok');
        },
        (e: unknown) => e as WebAPIPlatformError,
      );
      expect(error.code).toBe('slack_webapi_platform_error');
      expect(error.message).toContain('effectgate_duplicate');
      expect(error.data.error).toBe('effectgate_duplicate');
      const data = error.data as unknown as { detail: string; effectgate: Record<string, unknown> };
      expect(data.detail).toContain('was already carried out by run slack-run');
      expect(data.effectgate).toMatchObject({ verdict: 'duplicate', tool: 'slack.post_message' });

      expect(ledger('/api/chat.postMessage')).toBe(1);
      expect(await duplicatesOf('slack.post_message')).toBe(1);
    });

    it('@octokit/rest: a duplicate issue is a RequestError 422 whose message is the gate’s reason', async () => {
      const octokit = new Octokit({
        auth: 'ghp_effectgate',
        baseUrl: `http://api.github.com:${standIn.port}`,
        request: { fetch: gatedFetch('github-run') },
      });
      const issue = { owner: 'acme', repo: 'widgets', title: 'Disk full on db-1' };
      expect((await octokit.rest.issues.create(issue)).status).toBe(201);

      const error = await octokit.rest.issues.create(issue).then(
        () => {
          throw new Error('the duplicate was answered as created');
        },
        (e: unknown) => e as { name: string; status: number; message: string; response: { data: unknown } },
      );
      expect(error.name).toBe('HttpError');
      expect(error.status).toBe(422);
      expect(error.message).toContain('was already carried out by run github-run');
      expect(error.response.data).toMatchObject({
        status: '422',
        effectgate: { verdict: 'duplicate', tool: 'github.create_issue' },
      });

      expect(ledger('/repos/acme/widgets/issues')).toBe(1);
      expect(await duplicatesOf('github.create_issue')).toBe(1);
    });
    it('argument refusals are each SDK’s own error with the gate’s reason, sent once and not retried', async () => {
      const before = standIn.requests.length;

      const stripeFetch = counting(gatedFetch('stripe-refused'));
      const stripe = new Stripe('sk_test_effectgate', {
        host: 'api.stripe.com',
        port: standIn.port,
        protocol: 'http',
        httpClient: Stripe.createFetchHttpClient(stripeFetch.fetch),
        maxNetworkRetries: 2,
      });
      const order = { customer: 'cus_9', amount: 100, currency: 'eur', description: 'order 9' };
      const stripeError = await rejection<InstanceType<typeof Stripe.errors.StripeInvalidRequestError>>(
        stripe.paymentIntents.create(order, { idempotencyKey: 'k'.repeat(300) }),
        'an unusable idempotency key was sent',
      );
      expect(stripeError).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
      expect(stripeError.statusCode).toBe(400);
      expect(stripeError.code).toBe('effectgate_idempotency_key');
      expect(stripeError.message).toContain('stripe.create_payment_intent');
      expect(stripeFetch.calls()).toBe(1);

      const slackFetch = counting(gatedFetch('slack-refused'));
      const slack = new WebClient('xoxb-effectgate', {
        slackApiUrl: `http://slack.com:${standIn.port}/api/`,
        fetch: slackFetch.fetch,
      });
      // The channel in the query and in the body: servers disagree on which one counts.
      const slackError = await rejection<WebAPIPlatformError>(
        slack.apiCall('chat.postMessage?channel=C0999999', { channel: 'C0123456', text: 'refused' }),
        'an ambiguous message was posted',
      );
      expect(slackError.code).toBe('slack_webapi_platform_error');
      expect(slackError.data.error).toBe('effectgate_arguments_ambiguous');
      const slackData = slackError.data as unknown as { detail: string; effectgate: Record<string, unknown> };
      expect(slackData.detail).toContain('both in the query and in the body');
      expect(slackData.effectgate).toMatchObject({ code: 'EG_ERR_ARGUMENTS_AMBIGUOUS', status: 422 });
      expect(slackFetch.calls()).toBe(1);

      const githubFetch = counting(gatedFetch('github-refused'));
      const octokit = new Octokit({
        auth: 'ghp_effectgate',
        baseUrl: `http://api.github.com:${standIn.port}`,
        request: { fetch: githubFetch.fetch },
      });
      // `Title` is the key's `title` only to a server that reads member names without case.
      const githubError = await rejection<{ name: string; status: number; message: string }>(
        octokit.request('POST /repos/{owner}/{repo}/issues', {
          owner: 'acme',
          repo: 'widgets',
          Title: 'x',
        } as never),
        'an ambiguous issue was created',
      );
      expect(githubError.name).toBe('HttpError');
      expect(githubError.status).toBe(422);
      expect(githubError.message).toContain('without letter case');
      expect(githubFetch.calls()).toBe(1);

      expect(standIn.requests.length).toBe(before);
    });
  });

  describe(`vendor SDKs read a store outage in their own dialect and do not retry it (${target.name})`, () => {
    it('stripe-node, @slack/web-api and Octokit each raise their own error once, and nothing is sent', async () => {
      const store = await openTestStore(target);
      const gate = await createGate({
        policies,
        store,
        scope: { tenant: 'acme', area: 'billing', agent: 'sdk-bot' },
        resolveGovernedHosts: 'off',
      });
      const standIn = await startUpstream((_req, res) => json(res, 500, { message: 'must not be reached' }));
      const agent = loopbackAgent();
      const through = (): ReturnType<typeof counting> =>
        counting(fetchThrough(agent.compose(gateInterceptor(gate, { run: 'outage-run' }))));
      try {
        await store.close(); // the store goes away under a running gate

        const stripeFetch = through();
        const stripe = new Stripe('sk_test_effectgate', {
          host: 'api.stripe.com',
          port: standIn.port,
          protocol: 'http',
          httpClient: Stripe.createFetchHttpClient(stripeFetch.fetch),
          maxNetworkRetries: 2,
        });
        const stripeError = await rejection<InstanceType<typeof Stripe.errors.StripeAPIError>>(
          stripe.paymentIntents.create({ customer: 'cus_1', amount: 1, currency: 'eur', description: 'o' }),
          'a payment was answered without a store',
        );
        expect(stripeError).toBeInstanceOf(Stripe.errors.StripeAPIError);
        expect(stripeError.statusCode).toBe(503);
        expect(stripeError.code).toBe('effectgate_store_unavailable');
        expect(stripeError.message).toContain('cannot reach its store');
        expect(stripeError.headers?.['retry-after']).toBe('5');
        expect(stripeFetch.calls()).toBe(1);

        const slackFetch = through();
        const slack = new WebClient('xoxb-effectgate', {
          slackApiUrl: `http://slack.com:${standIn.port}/api/`,
          fetch: slackFetch.fetch,
        });
        const slackError = await rejection<WebAPIPlatformError>(
          slack.chat.postMessage({ channel: 'C0123456', text: 'outage' }),
          'a message was answered without a store',
        );
        expect(slackError.code).toBe('slack_webapi_platform_error');
        expect(slackError.data.error).toBe('effectgate_store_unavailable');
        expect((slackError.data as unknown as { detail: string }).detail).toContain('cannot reach its store');
        expect(slackFetch.calls()).toBe(1);

        const githubFetch = through();
        const octokit = new Octokit({
          auth: 'ghp_effectgate',
          baseUrl: `http://api.github.com:${standIn.port}`,
          request: { fetch: githubFetch.fetch },
        });
        const githubError = await rejection<{ name: string; status: number; message: string }>(
          octokit.rest.issues.create({ owner: 'acme', repo: 'widgets', title: 'outage' }),
          'an issue was answered without a store',
        );
        expect(githubError.name).toBe('HttpError');
        expect(githubError.status).toBe(503);
        expect(githubError.message).toContain('cannot reach its store');
        expect(githubFetch.calls()).toBe(1);

        expect(standIn.requests).toHaveLength(0);
      } finally {
        await agent.close();
        await gate.close();
        await standIn.close();
      }
    });
  });
}
