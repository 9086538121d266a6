/**
 * Linear's own SDK end to end: a real `LinearClient` (`@linear/sdk`) creates issues through the
 * real gate on a real store, by both front doors (the forward proxy, the in-process undici
 * interceptor), against a loopback GraphQL server that answers as Linear does (`issue-graph.ts`),
 * under the shipped `policies/linear.yaml` pointed at it. The server's ledger is the ground truth:
 * the repeat of a created issue never reaches it and comes back as the SDK's own error carrying
 * the gate's reason; a mutation answered `200` with `errors` leaves its operation failed, so the
 * corrected call goes out and creates the one issue; and the trail says exactly what the ledger
 * says.
 */
import { readFileSync } from 'node:fs';
import { LinearClient, LinearError } from '@linear/sdk';
import { Agent, type Dispatcher, ProxyAgent, fetch as undiciFetch } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createProxyServer, type ProxyServer } from '../../../src/proxy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { type IssueGraph, startIssueGraph } from './issue-graph.js';

const SHIPPED = readFileSync(new URL('../../../policies/linear.yaml', import.meta.url), 'utf8');
// The shipped policy, pointed at the loopback stand-in instead of api.linear.app.
const policies = parsePolicyFiles([
  { file: 'linear.yaml', text: SHIPPED.replaceAll('hosts: [api.linear.app]', 'hosts: [127.0.0.1]') },
]);

/** One HTTP exchange of the SDK, as its `fetch` saw it. */
interface Exchange {
  readonly status: number;
  readonly verdict: string | null;
  readonly operation: string | null;
  readonly body: { errors?: { message: string; extensions?: Record<string, unknown> }[] };
}

/** The rejection of `call`, which must reject. */
async function rejection(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (err: unknown) => err,
  );
}

for (const target of storeTargets()) {
  describe(`Linear's SDK through the gate (${target.name})`, () => {
    let store: TestStore;
    let graph: IssueGraph;
    let gate: Gate;
    let proxy: ProxyServer;
    const doors = new Map<string, Dispatcher>();

    beforeAll(async () => {
      store = await openTestStore(target);
      graph = await startIssueGraph();
      gate = await createGate({ policies, store, scope: { tenant: 'acme', area: 'eng', agent: 'bot' } });
      proxy = createProxyServer({ gate });
      const addr = await proxy.listen('127.0.0.1', 0);
      doors.set('proxy', new ProxyAgent({ uri: `http://127.0.0.1:${addr.port}`, proxyTunnel: false }));
      doors.set('interceptor', new Agent().compose(gateInterceptor(gate, { run: 'r-linear-sdk' })));
    });
    afterEach(() => {
      vi.unstubAllGlobals();
    });
    afterAll(async () => {
      for (const d of doors.values()) await d.close();
      await proxy?.close();
      await gate?.close();
      await graph?.close();
      await store?.close();
    });

    for (const doorName of ['proxy', 'interceptor'] as const) {
      let runs = 0;
      /**
       * A LinearClient whose requests go through `doorName`, in a run of its own, and every
       * exchange it made. The SDK calls the global `fetch`: it is undici's here, with the door.
       */
      const connect = (): { client: LinearClient; exchanges: Exchange[] } => {
        const exchanges: Exchange[] = [];
        const dispatcher = doors.get(doorName)!;
        vi.stubGlobal('fetch', async (url: string, init: RequestInit) => {
          const res = await undiciFetch(url, { ...(init as object), dispatcher });
          exchanges.push({
            status: res.status,
            verdict: res.headers.get('effectgate-verdict'),
            operation: res.headers.get('effectgate-operation'),
            body: (await res.clone().json()) as Exchange['body'],
          });
          return res;
        });
        return {
          client: new LinearClient({
            apiKey: 'lin_api_test',
            apiUrl: graph.url,
            headers: { 'effectgate-run': `r-${doorName}-${++runs}` },
          }),
          exchanges,
        };
      };
      const team = `team-${doorName}`;
      const trailOf = (title: string): ReturnType<TestStore['listOperations']> =>
        store.listOperations({ toolId: 'linear.issue_create', keyValues: [team, title] });

      it(`creates an issue once; its repeat is the SDK's own error with the gate's reason (${doorName})`, async () => {
        const title = 'Disk full on db-1';
        const { client, exchanges } = connect();
        const created = await client.createIssue({ teamId: team, title });
        expect(created.success).toBe(true);

        const err = await rejection(client.createIssue({ teamId: team, title }));
        expect(err).toBeInstanceOf(LinearError);
        const [first, repeat] = exchanges;
        expect(first).toMatchObject({ status: 200, verdict: 'allow' });
        expect(repeat).toMatchObject({ status: 200, verdict: 'duplicate', operation: first!.operation });
        const gateError = repeat!.body.errors![0]!;
        expect(gateError.extensions).toMatchObject({
          code: 'EFFECTGATE_DUPLICATE',
          verdict: 'duplicate',
          tool: 'linear.issue_create',
          operation_id: first!.operation,
        });
        // The SDK's message is the gate's own text (its first letter capitalised, as it does).
        expect((err as LinearError).message.toLowerCase()).toBe(gateError.message.toLowerCase());
        expect((err as LinearError).errors?.[0]?.message).toBe(gateError.message);

        expect(graph.ledger.filter((i) => i.teamId === team && i.title === title)).toHaveLength(1);
        const ops = await trailOf(title);
        expect(ops).toHaveLength(1);
        expect(ops[0]).toMatchObject({ id: first!.operation, state: 'succeeded' });
        expect(ops[0]!.attempts).toHaveLength(1);
        expect(ops[0]!.attempts[0]).toMatchObject({
          dispatchState: 'response_received',
          status: 200,
          destinationRef: graph.ledger.find((i) => i.teamId === team && i.title === title)!.id,
          error: null,
        });
      });

      it(`leaves a mutation answered 200 with errors failed, and lets the corrected call go out (${doorName})`, async () => {
        const title = 'Printer on fire';
        const { client, exchanges } = connect();
        const err = await rejection(client.createIssue({ teamId: team, title, priority: 9 }));
        // The destination's own refusal, as the SDK reads it: not the gate's.
        expect(err).toBeInstanceOf(LinearError);
        expect((err as LinearError).message).toContain('priority must be between 0 and 4.');
        expect(exchanges[0]).toMatchObject({ status: 200, verdict: 'allow' });
        const [failed] = await trailOf(title);
        expect(failed).toMatchObject({ state: 'failed' });
        expect(failed!.attempts[0]).toMatchObject({
          dispatchState: 'response_received',
          status: 200,
          error: 'GraphQL error INVALID_INPUT',
        });

        const corrected = await client.createIssue({ teamId: team, title, priority: 2 });
        expect(corrected.success).toBe(true);
        expect(exchanges[1]).toMatchObject({ status: 200, verdict: 'allow' });
        const again = await rejection(client.createIssue({ teamId: team, title, priority: 2 }));
        expect((again as LinearError).errors?.[0]?.message).toBe(exchanges[2]!.body.errors![0]!.message);
        expect(exchanges[2]).toMatchObject({ verdict: 'duplicate' });

        // The ledger and the trail agree: two executions, one issue; every attempt the gate let
        // out is one the server executed, and the one that created the issue is the succeeded one.
        expect(graph.calls.filter((c) => c.teamId === team && c.title === title)).toEqual([
          { teamId: team, title, created: false },
          { teamId: team, title, created: true },
        ]);
        const issues = graph.ledger.filter((i) => i.teamId === team && i.title === title);
        expect(issues).toEqual([expect.objectContaining({ priority: 2 })]);
        const ops = await trailOf(title);
        const attempts = ops
          .flatMap((o) => o.attempts)
          .sort((a, b) => a.startedAt.localeCompare(b.startedAt));
        expect(attempts.map((a) => a.error)).toEqual(['GraphQL error INVALID_INPUT', null]);
        expect(ops.filter((o) => o.state === 'succeeded')).toHaveLength(1);
        expect(attempts.find((a) => a.error === null)?.destinationRef).toBe(issues[0]!.id);
      });
      it(`refuses a document it cannot read one way as a GraphQL error the SDK raises, sent once (${doorName})`, async () => {
        const { client, exchanges } = connect();
        const calls = graph.calls.length;
        // Two operations and no operationName: which one a server runs is not the request's to say.
        const document = `mutation A { issueCreate(input: { teamId: "${team}", title: "a" }) { success } }
          mutation B { issueCreate(input: { teamId: "${team}", title: "b" }) { success } }`;
        const err = await rejection(client.client.rawRequest(document));
        expect(err).toBeInstanceOf(LinearError);
        expect(exchanges).toHaveLength(1);
        const gateError = exchanges[0]!.body.errors![0]!;
        expect(exchanges[0]!.status).toBe(200);
        expect(gateError.extensions).toMatchObject({
          code: 'EFFECTGATE_GRAPHQL_INVALID',
          error_code: 'EG_ERR_GRAPHQL_INVALID',
          status: 400,
        });
        expect((err as LinearError).errors?.[0]?.message).toBe(gateError.message);
        expect(graph.calls).toHaveLength(calls);
      });
    }
  });
}
