/**
 * The shipped Slack classification through the in-process front door, against a Slack stand-in
 * that keeps its own ledger: Slack answers `200 {"ok": false}` when it posted nothing, and the
 * tool's `outcome.failed_if` reads that answer. The refused post is `failed` (its key released, so
 * the corrected post goes out, once); a genuine success confirms the key and a repeat is a
 * duplicate that never reaches Slack.
 */
import { readFileSync } from 'node:fs';
import { Agent, type Dispatcher, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { type SlackStandIn, slackPolicyFor, startSlackStandIn } from '../../helpers/slack-stand-in.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';

const SHIPPED = readFileSync(new URL('../../../policies/slack.yaml', import.meta.url), 'utf8');

for (const target of storeTargets()) {
  describe(`Slack's 200 ok:false through the undici interceptor, on ${target.name}`, () => {
    let store: TestStore;
    let gate: Gate;
    let slack: SlackStandIn;
    let agent: Agent;

    beforeAll(async () => {
      store = await openTestStore(target);
      gate = await createGate({
        policies: parsePolicyFiles([{ file: 'slack.yaml', text: slackPolicyFor(SHIPPED, '127.0.0.1') }]),
        store,
        scope: { tenant: 'acme', area: 'ops', agent: 'notifier' },
      });
      slack = await startSlackStandIn();
      agent = new Agent();
    });
    afterAll(async () => {
      await agent?.close();
      await gate?.close();
      await slack?.close();
      await store?.close();
    });

    const post = async (run: string, channel: string, text: string) => {
      const dispatcher: Dispatcher = agent.compose(gateInterceptor(gate, { run }));
      const res = await request(`${slack.url}/api/chat.postMessage`, {
        dispatcher,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer xoxb-test' },
        body: JSON.stringify({ channel, text }),
      });
      const body = (await res.body.json()) as Record<string, unknown>;
      const operation = res.headers['effectgate-operation'];
      return {
        status: res.statusCode,
        verdict: res.headers['effectgate-verdict'],
        operation: typeof operation === 'string' ? operation : null,
        body,
      };
    };
    const keyState = async (operation: string): Promise<string | undefined> =>
      (
        await store.query<{ state: string }>(
          `select state from dedupe_keys where operation_id = '${operation}'`,
        )
      )[0]?.state;

    it('records the refused post failed with its rule and error code, and lets the corrected post out once', async () => {
      const first = await post('run-1', 'C1', 'Deploy of api v42 failed');
      expect(first).toMatchObject({
        status: 200,
        verdict: 'allow',
        body: { ok: false, error: 'not_in_channel' },
      });
      const refused = await store.getOperation(first.operation!);
      expect(refused?.state).toBe('failed');
      expect(refused?.attempts[0]).toMatchObject({
        status: 200,
        outcomeRule: 'failed_if $.ok == false',
        errorCode: 'not_in_channel',
      });
      expect(await keyState(first.operation!)).not.toBe('confirmed');
      expect(slack.ledger).toHaveLength(0);

      slack.invite('C1');
      const corrected = await post('run-1', 'C1', 'Deploy of api v42 failed');
      expect(corrected).toMatchObject({ status: 200, verdict: 'allow', body: { ok: true } });
      const done = await store.getOperation(corrected.operation!);
      expect(done?.state).toBe('succeeded');
      expect(await keyState(corrected.operation!)).toBe('confirmed');
      expect(slack.ledger.map((m) => m.text)).toEqual(['Deploy of api v42 failed']);

      // Posted now: the same post again is a duplicate of it and never reaches Slack (the gate
      // answers in Slack's own dialect, 200 ok: false).
      const again = await post('run-2', 'C1', 'Deploy of api v42 failed');
      expect(again).toMatchObject({
        status: 200,
        verdict: 'duplicate',
        body: { ok: false, error: 'effectgate_duplicate' },
      });
      expect(slack.ledger).toHaveLength(1);
    });

    it('a genuine success then a repeat: a duplicate, and Slack posted exactly one message', async () => {
      slack.invite('C2');
      const first = await post('run-3', 'C2', 'Nightly backup done');
      expect(first).toMatchObject({ status: 200, verdict: 'allow', body: { ok: true } });
      const op = await store.getOperation(first.operation!);
      expect(op?.attempts[0]).toMatchObject({ outcomeRule: 'status 200', errorCode: null });
      const repeat = await post('run-4', 'C2', 'Nightly backup done');
      expect(repeat).toMatchObject({
        verdict: 'duplicate',
        body: { ok: false, error: 'effectgate_duplicate' },
      });
      expect(slack.ledger.filter((m) => m.channel === 'C2')).toHaveLength(1);
    });
  });
}
