/**
 * A Node agent as it ships: undici's `EnvHttpProxyAgent` built from `HTTP_PROXY` alone, and a
 * `ProxyAgent` given only the proxy's URL, both tunnel `http://` URLs with CONNECT. Through the
 * real `effectgate proxy`, started with no `--allow-connect-ports`, to a plain-HTTP issue tracker
 * on a port a tool names: governed (the create goes out once, the repeat is a duplicate the client
 * receives as an ordinary response), and the tracker's own ledger holds one issue. On PGlite
 * always, on PostgreSQL when DATABASE_URL is set.
 */
import { type Dispatcher, EnvHttpProxyAgent, ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { storeTargets } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/unknown-policies/', import.meta.url).pathname;
const PROXY_VARIABLES = ['http_proxy', 'HTTP_PROXY', 'https_proxy', 'HTTPS_PROXY', 'no_proxy', 'NO_PROXY'];

interface Answer {
  readonly status: number;
  readonly verdict: unknown;
  readonly json: Record<string, unknown>;
}

async function createIssue(url: string, dispatcher: Dispatcher, title: string): Promise<Answer> {
  const res = await request(url, {
    method: 'POST',
    dispatcher,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ title }),
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    verdict: res.headers['effectgate-verdict'],
    json: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}

for (const target of storeTargets()) {
  describe(`Node agents tunnelling through the proxy with no options (${target.name})`, {
    timeout: 60_000,
  }, () => {
    let tracker: IssueTracker;
    let gate: GateUnderTest;
    const saved = new Map<string, string | undefined>();
    const agents: Dispatcher[] = [];

    beforeAll(async () => {
      tracker = await startIssueTracker();
      gate = await startGateUnderTest(target, POLICIES);
      // The agent's environment: HTTP_PROXY only, nothing exempting loopback.
      for (const name of PROXY_VARIABLES) {
        saved.set(name, process.env[name]);
        delete process.env[name];
      }
      process.env['HTTP_PROXY'] = gate.proxy.url;
    }, 120_000);

    afterAll(async () => {
      for (const [name, value] of saved) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
      for (const agent of agents) await agent.close();
      await gate?.close();
      await tracker?.close();
    });

    const cases: [string, () => Dispatcher][] = [
      ['EnvHttpProxyAgent from HTTP_PROXY', () => new EnvHttpProxyAgent()],
      ['ProxyAgent with only the proxy URL', () => new ProxyAgent(gate.proxy.url)],
    ];

    it.each(cases)(
      '%s: 201, then a duplicate answered as a response; one issue created',
      async (name, make) => {
        const agent = make();
        agents.push(agent);
        const collection = `/repos/acme/${name.split(' ')[0]!.toLowerCase()}/issues`;
        const first = await createIssue(`${tracker.url}${collection}`, agent, 'Disk full on db-1');
        expect(first).toMatchObject({ status: 201, verdict: 'allow' });
        const second = await createIssue(`${tracker.url}${collection}`, agent, 'Disk full on db-1');
        expect(second.status).toBe(409);
        expect(second.verdict).toBe('duplicate');
        expect(second.json).toMatchObject({ verdict: 'duplicate', operation_id: expect.any(String) });
        // The destination's own ledger: one issue, created under the operation's key.
        expect(tracker.issues(collection)).toHaveLength(1);
        expect(tracker.posts(collection)).toHaveLength(1);
        expect(tracker.posts(collection)[0]!.headers['idempotency-key']).toBe(second.json['operation_id']);
      },
    );
  });
}
