/**
 * Agent read-backs end to end (docs/design.md §3 "Observations"): the real
 * `effectgate proxy`, a real loopback issue tracker, undici through the proxy, a real store
 * (PGlite always, PostgreSQL when DATABASE_URL is set). After a lost response, the agent lists the
 * issues itself (the request the tool's `reconcile` lookup describes): the gate answers it as
 * usual, records the answer as a read_back observation of the unknown operation, and settles it
 * when the item is there, so the agent's retry is a duplicate and nothing is created twice.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, startGateUnderTest, type Trail } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { storeTargets } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/unknown-policies/', import.meta.url).pathname;

for (const target of storeTargets()) {
  describe(`agent read-backs through the proxy (${target.name})`, { timeout: 60_000 }, () => {
    let tracker: IssueTracker;
    let gate: GateUnderTest;
    let agent: ProxyAgent;

    beforeAll(async () => {
      tracker = await startIssueTracker();
      gate = await startGateUnderTest(target, POLICIES);
      agent = new ProxyAgent({ uri: gate.proxy.url, proxyTunnel: false });
    }, 120_000);

    afterAll(async () => {
      await agent?.close();
      await gate?.close();
      await tracker?.close();
    });

    /** The agent's own GET through the proxy. */
    async function list(path: string, run: string): Promise<{ status: number; json: unknown }> {
      const res = await request(`${tracker.url}${path}`, {
        dispatcher: agent,
        headers: { accept: 'application/json', 'effectgate-run': run },
      });
      return { status: res.statusCode, json: await res.body.json() };
    }

    async function until(op: string, ok: (t: Trail) => boolean): Promise<Trail> {
      for (let i = 0; i < 100; i++) {
        const t = await gate.trail(op);
        if (ok(t)) return t;
        await sleep(50);
      }
      return gate.trail(op);
    }

    it("the agent's own listing that shows the issue settles the unknown operation; its retry is a duplicate", async () => {
      const c = '/repos/acme/readback/issues';
      tracker.plan(c, 'commit-then-destroy');
      const issue = { title: 'Rotate the signing key', body: 'quarterly' };
      const first = await gate.send(`${tracker.url}${c}`, issue, { 'effectgate-run': 'agent-1' });
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;

      const listed = await list(`${c}?state=all`, 'agent-1');
      // Answered as the destination answered, whatever the gate makes of it.
      expect(listed.status).toBe(200);
      expect(listed.json).toEqual(tracker.issues(c));

      const trail = await until(op, (t) => t.operation.state !== 'unknown');
      expect(trail.operation.state).toBe('succeeded');
      const [rb] = trail.observations.filter((o) => o.kind === 'read_back');
      expect(rb).toMatchObject({
        result: 'succeeded',
        facts: {
          by: 'agent read-back (run agent-1)',
          status: 200,
          destinationRef: tracker.issues(c)[0]!.html_url,
        },
      });
      const retry = await gate.send(`${tracker.url}${c}`, issue, { 'effectgate-run': 'agent-1' });
      expect(retry.status).toBe(409);
      expect(retry.json).toMatchObject({
        verdict: 'duplicate',
        operation_id: op,
        operation_state: 'succeeded',
      });
      expect(tracker.posts(c)).toHaveLength(1);
      expect(tracker.issues(c)).toHaveLength(1);
    });

    it('a listing without the issue is a negative observation, recorded once per answer; the operation stays unknown', async () => {
      const c = '/repos/acme/readback-none/issues';
      tracker.plan(c, 'destroy-before-commit');
      const first = await gate.send(
        `${tracker.url}${c}`,
        { title: 'Never made' },
        { 'effectgate-run': 'agent-2' },
      );
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;
      tracker.seed(c, 'Someone else entirely');

      expect((await list(`${c}?state=all`, 'agent-2')).status).toBe(200);
      const trail = await until(op, (t) => t.observations.some((o) => o.kind === 'read_back'));
      expect(trail.observations.filter((o) => o.kind === 'read_back')).toMatchObject([
        { result: 'noted', facts: { status: 200 } },
      ]);
      expect(trail.operation.state).toBe('unknown');
      // The same answer again is the same evidence; a listing of another repository is not about it.
      await list(`${c}?state=all`, 'agent-2');
      await list('/repos/acme/other/issues?state=all', 'agent-2');
      // Not the lookup: an extra parameter could hide a second copy (a page, a filter). (A new
      // answer, so only the query can keep it out.)
      tracker.seed(c, 'Yet another');
      await list(`${c}?state=all&per_page=1`, 'agent-2');
      await sleep(300);
      const after = await gate.trail(op);
      expect(after.observations.filter((o) => o.kind === 'read_back')).toHaveLength(1);
      expect(after.operation.state).toBe('unknown');
    });
  });
}
